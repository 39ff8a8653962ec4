-- Raw payloads (issue 29): every payload is kept byte for byte with its
-- content type, JSON or not, and handed back as it came. Until now a payload
-- was jsonb, and Claim handed back jsonb's rendering (keys sorted, spaces and
-- escapes changed, repeated keys gone), so nobody could verify a provider's
-- signature against it, and a body that was not JSON was refused.
--
-- How the upgrade spares a large inbox. Nothing here rewrites or scans
-- inbox_events: each statement changes the catalog only, under a lock held
-- for milliseconds whatever the table's length.
-- - raw_payload is a new nullable column: no default, so no rewrite. New rows
--   write it (and leave the old jsonb `payload` NULL); rows from before keep
--   their jsonb `payload` and no raw_payload, and are read through
--   coalesce(raw_payload, convert_to(payload::text, 'UTF8')): jsonb's
--   rendering, which is all that was ever kept of them (their original bytes
--   are gone). No backfill is needed, so none runs: old rows are never
--   rewritten, and leave with retention as they always would.
-- - content_type is NOT NULL with a constant default: since PostgreSQL 11
--   that is a catalog entry, not a rewrite, and every old row reads
--   'application/json', which is what it was.
-- - The check that an open event keeps its payload is replaced by one that
--   accepts either column, added NOT VALID (no scan under the lock: every
--   old row satisfies it, since each satisfied the old one); 0020 validates
--   it without blocking writes, and builds retention's new index concurrently.
-- SQL users who read `payload` read NULL for new rows: inboxd_payload_json(e)
-- below gives every JSON payload as jsonb, old or new (docs/operations.md).
ALTER TABLE inbox_events
    ADD COLUMN raw_payload bytea,
    ADD COLUMN content_type text NOT NULL DEFAULT 'application/json';

ALTER TABLE inbox_events DROP CONSTRAINT inbox_events_payload_kept_until_completed;
ALTER TABLE inbox_events ADD CONSTRAINT inbox_events_payload_kept_until_completed
    CHECK (payload IS NOT NULL OR raw_payload IS NOT NULL OR state = 'completed') NOT VALID;

-- Conflicting copies likewise: new copies keep their bytes and type; a copy
-- kept before keeps its jsonb. Their payload_sha256 and payload_bytes are now
-- those of the bytes as received.
ALTER TABLE inbox_conflicts
    ADD COLUMN raw_payload bytea,
    ADD COLUMN content_type text NOT NULL DEFAULT 'application/json';

COMMENT ON COLUMN inbox_events.payload IS
    'The payload of an event accepted before migration 0019, as jsonb; NULL for later events (raw_payload) and once retention dropped it. Read inboxd_payload(e) or inboxd_payload_json(e).';
COMMENT ON COLUMN inbox_events.raw_payload IS
    'The payload exactly as accepted (migration 0019 on); NULL for earlier events and once retention dropped it.';

-- Whether a content type is JSON: application/json or any type/subtype+json,
-- its media type compared without parameters and without regard to ASCII
-- case. A media type with anything but a token's ASCII characters is not
-- JSON. inboxd.domain.validation.is_json_type says the same in Python, so
-- that what the server validated as JSON is what this calls JSON; translate
-- rather than lower(), which follows the database's locale.
CREATE FUNCTION inboxd_is_json_type(p_content_type text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT m ~ '^[A-Za-z0-9!#$&^_.+/-]+$'
           AND translate(m, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') LIKE ANY
               (ARRAY['application/json', '%/%+json'])
    FROM (SELECT btrim(split_part(p_content_type, ';', 1), E' \t') AS m) AS media
$$;

-- An event's payload as bytes, exactly as accepted (an event from before
-- 0019: jsonb's rendering of it); NULL once retention dropped it.
CREATE FUNCTION inboxd_payload(e inbox_events) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(e.raw_payload, convert_to(e.payload::text, 'UTF8'))
$$;

-- An event's payload as jsonb when its content type is JSON, for SQL users
-- who query payloads (`inboxd_payload_json(e) ->> 'id'`); NULL for any other
-- content type and once retention dropped it.
CREATE FUNCTION inboxd_payload_json(e inbox_events) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN e.raw_payload IS NULL THEN e.payload
                WHEN inboxd_is_json_type(e.content_type) THEN convert_from(e.raw_payload, 'UTF8')::jsonb
           END
$$;

-- The same two for a conflicting copy.
CREATE FUNCTION inboxd_payload(c inbox_conflicts) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(c.raw_payload, convert_to(c.payload::text, 'UTF8'))
$$;

CREATE FUNCTION inboxd_payload_json(c inbox_conflicts) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN c.raw_payload IS NULL THEN c.payload
                WHEN inboxd_is_json_type(c.content_type) THEN convert_from(c.raw_payload, 'UTF8')::jsonb
           END
$$;

-- Whether a repeat's payload is the stored one's (Accept's judgement): the
-- same bytes always; JSON (both types JSON) equal as JSON values, so key
-- order and whitespace do not count; anything else only by its bytes. The
-- content types themselves do not count. A stored payload that retention
-- dropped cannot be compared: the key was already processed, so the repeat
-- counts as the same. jsonb parses both sides only when the bytes differ.
-- STABLE, as convert_from is: so the planner may inline it.
CREATE FUNCTION inboxd_same_payload(
    p_stored_raw bytea, p_stored_json jsonb, p_stored_type text, p_raw bytea, p_raw_is_json boolean
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN p_stored_raw IS NULL AND p_stored_json IS NULL THEN true
        WHEN p_stored_raw = p_raw THEN true
        WHEN NOT (p_raw_is_json AND inboxd_is_json_type(p_stored_type))
            THEN coalesce(p_stored_raw, convert_to(p_stored_json::text, 'UTF8')) = p_raw
        ELSE coalesce(p_stored_json, convert_from(p_stored_raw, 'UTF8')::jsonb) = convert_from(p_raw, 'UTF8')::jsonb
    END
$$;
