-- Subscriptions' control plane (fan-out at accept, migration 0028): the
-- operators' subscriptions and their audit. The accept statement reads the
-- same table (event_accept_many, accepts.sql). A creation or a removal
-- writes its row and its audit row in one statement: a subscription never
-- changes unaudited, nor is an audit row left for a change that rolled back.

-- name: subscription_lock
-- Changes of one name take turns, a creation too (no row to lock yet).
SELECT pg_advisory_xact_lock(7311046, hashtext(%(name)s))

-- name: subscription_read
-- One subscription by its name.
SELECT name, namespace_pattern, event_types, created_at, created_by
FROM inbox_subscriptions
WHERE name = %(name)s

-- name: subscription_list
-- Every subscription, by name.
SELECT name, namespace_pattern, event_types, created_at, created_by
FROM inbox_subscriptions
ORDER BY name COLLATE "C"

-- name: subscription_insert
-- (none) -> a subscription, audited; its change's time is its creation's.
WITH created AS (
    INSERT INTO inbox_subscriptions (name, namespace_pattern, like_pattern, event_types, created_at, created_by)
    VALUES (%(name)s, %(namespace_pattern)s, %(like_pattern)s, %(event_types)s::text[], inboxd_now(%(now)s),
            %(actor)s)
    RETURNING name, namespace_pattern, event_types, created_at, created_by
), audited AS (
    INSERT INTO inbox_subscription_changes (name, actor, reason, before, after, changed_at)
    SELECT name, %(actor)s, %(reason)s, 'none', %(after)s, created_at FROM created
)
SELECT name, namespace_pattern, event_types, created_at, created_by FROM created

-- name: subscription_delete
-- A subscription -> (none), audited. Its copies stay: each is an event of
-- its own, to be processed, replayed or retained as any other.
WITH removed AS (
    DELETE FROM inbox_subscriptions WHERE name = %(name)s
    RETURNING name, namespace_pattern, event_types, created_at, created_by
), audited AS (
    INSERT INTO inbox_subscription_changes (name, actor, reason, before, after, changed_at)
    SELECT name, %(actor)s, %(reason)s, %(before)s, 'none', inboxd_now(%(now)s) FROM removed
)
SELECT name, namespace_pattern, event_types, created_at, created_by FROM removed

-- name: subscription_changes_recent
-- A name's audited changes, newest first, at most %(limit)s.
SELECT name, actor, reason, changed_at, before, after
FROM inbox_subscription_changes
WHERE name = %(name)s
ORDER BY id DESC
LIMIT %(limit)s
