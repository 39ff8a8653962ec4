-- Claim paths whose cost does not depend on other namespaces' backlog.
--
-- inbox_events_due (due_at) alone serves a Claim over every namespace, but a
-- Claim naming its namespaces, under a generic plan, walked it and filtered
-- out every due row of every other namespace (42 ms beside a 100,000-event
-- backlog). Here each named namespace is one range of this index: the oldest
-- due rows of that namespace and nothing else. The wake-up poller reads it too.
-- In byte order (COLLATE "C"), so that the namespaces under a token's
-- pattern prefix ("mailera/") are one contiguous range whatever the
-- database's collation; queries name the collation to use it.
CREATE INDEX inbox_events_namespace_due ON inbox_events (namespace COLLATE "C", due_at) WHERE due_at IS NOT NULL;

-- The Claim over every namespace keeps an index on due_at alone. Its
-- predicate now names the open states (the same rows: due_at is set exactly
-- while PENDING or PROCESSING), and only that Claim's WHERE says so. The
-- per-namespace scans cannot prove it, so no plan, whatever the statistics
-- say (one namespace holding nearly every row makes both look alike), walks
-- other namespaces' rows in due order to find one namespace's.
DROP INDEX inbox_events_due;
CREATE INDEX inbox_events_due ON inbox_events (due_at) WHERE state IN ('pending', 'processing');

-- The lease rescuer finds expired leases without reading the PENDING backlog,
-- which shares inbox_events_due with them. Only PROCESSING rows are indexed.
CREATE INDEX inbox_events_leases ON inbox_events (lease_expires_at) WHERE state = 'processing';
