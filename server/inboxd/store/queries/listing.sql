-- Filtered listings for the operators' console: by event type and key
-- prefix, and across the namespaces a token is granted. Like ListEvents
-- they page by keyset (the last row shown), never by OFFSET. The filters are
-- checked on the rows the listing index hands over, so a page costs the rows
-- scanned until it is full, and no more.

-- name: event_list_filtered_in_namespace
-- One page of a namespace's events in the given states, of one type and/or
-- under a key prefix (NULL: any), newest first, after a keyset position.
SELECT page.*
FROM unnest(%(states)s::text[]) AS s(state)
CROSS JOIN LATERAL (
    SELECT e.namespace, e.event_key, e.event_type, e.state, e.attempt, e.accepted_at, e.available_at,
           e.updated_at, coalesce(e.last_error, '') AS last_error
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

-- name: event_list_filtered_everywhere
-- One page of the events of every namespace matching one of the LIKE
-- patterns (a token's grants), in the given states, of one type and/or under
-- a key prefix (NULL: any), newest first.
SELECT e.namespace, e.event_key, e.event_type, e.state, e.attempt, e.accepted_at, e.available_at,
       e.updated_at, coalesce(e.last_error, '')
FROM inbox_events AS e
WHERE e.state = ANY(%(states)s::text[])
  AND e.namespace LIKE ANY(%(namespace_patterns)s::text[])
  AND (%(event_type)s::text IS NULL OR e.event_type = %(event_type)s::text)
  AND (%(key_prefix)s::text IS NULL OR starts_with(e.event_key, %(key_prefix)s::text))
  AND (e.accepted_at, e.namespace, e.event_key)
      < (coalesce(%(after_at)s::timestamptz, 'infinity'), %(after_namespace)s::text, %(after_key)s::text)
ORDER BY e.accepted_at DESC, e.namespace DESC, e.event_key DESC
LIMIT %(limit)s
