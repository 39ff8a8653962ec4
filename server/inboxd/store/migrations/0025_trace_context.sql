-- Tracing (DESIGN, Tracing; issue 31): each event keeps the W3C trace
-- context its first Accept brought (the AcceptRequest's trace_context, else
-- the call's traceparent/tracestate metadata), verbatim, so that every claim
-- hands it back and the worker's span joins the delivery's trace. NULL: the
-- Accept brought none. A repeat never overwrites it (the first delivery's
-- context wins); its span links to this one instead.
--
-- Nullable columns without a default: adding them rewrites nothing and holds
-- the table's lock only for the catalog change, however large the inbox.
ALTER TABLE inbox_events
    ADD COLUMN traceparent text,
    ADD COLUMN tracestate  text;
