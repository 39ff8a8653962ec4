-- Listings of event summaries, for ListEvents and the operators' console:
-- newest first, paged by keyset (the last row shown), never by OFFSET, and
-- without payloads. The console's filters (an event type, a key prefix, the
-- LIKE patterns of a token's grants) are checked on the rows the scan hands
-- over, so a page costs the rows scanned until it is full, and no more;
-- ListEvents passes no filter (NULL, and the pattern '%'). A summary names
-- the worker holding a PROCESSING event and its lease's expiry (NULL else).

-- name: event_list_in_namespace
-- One page of a namespace's events in the given states, of one type and/or
-- under a key prefix (NULL: any), newest first, after a keyset position.
-- One index range scan per state (inbox_events_listing), merged, so a page
-- costs O(page size) however large the namespace is.
SELECT page.*
FROM unnest(%(states)s::text[]) AS s(state)
CROSS JOIN LATERAL (
    SELECT e.namespace, e.event_key, e.event_type, e.state, e.attempt, e.accepted_at, e.available_at,
           e.updated_at, coalesce(e.last_error, '') AS last_error, coalesce(e.worker_id, '') AS worker_id,
           e.lease_expires_at
    FROM inbox_events AS e
    WHERE e.namespace = %(namespace)s AND e.state = s.state
      AND (e.accepted_at, e.event_key)
          < (coalesce(%(after_at)s::timestamptz, 'infinity'), %(after_key)s::text)
      AND (%(event_type)s::text IS NULL OR e.event_type = %(event_type)s::text)
      AND (%(key_prefix)s::text IS NULL OR starts_with(e.event_key, %(key_prefix)s::text))
    ORDER BY e.accepted_at DESC, e.event_key DESC
    LIMIT %(limit)s
) AS page
ORDER BY page.accepted_at DESC, page.event_key DESC
LIMIT %(limit)s

-- name: event_list_everywhere
-- One page of the events of every namespace matching one of the LIKE
-- patterns ('%': every namespace), in the given states, of one type and/or
-- under a key prefix (NULL: any), newest first. Scans the table: operators of
-- a large inbox name a namespace.
SELECT e.namespace, e.event_key, e.event_type, e.state, e.attempt, e.accepted_at, e.available_at,
       e.updated_at, coalesce(e.last_error, ''), coalesce(e.worker_id, ''), e.lease_expires_at
FROM inbox_events AS e
WHERE e.state = ANY(%(states)s::text[])
  AND e.namespace LIKE ANY(%(namespace_patterns)s::text[])
  AND (%(event_type)s::text IS NULL OR e.event_type = %(event_type)s::text)
  AND (%(key_prefix)s::text IS NULL OR starts_with(e.event_key, %(key_prefix)s::text))
  AND (e.accepted_at, e.namespace, e.event_key)
      < (coalesce(%(after_at)s::timestamptz, 'infinity'), %(after_namespace)s::text, %(after_key)s::text)
ORDER BY e.accepted_at DESC, e.namespace DESC, e.event_key DESC
LIMIT %(limit)s
