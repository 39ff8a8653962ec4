-- Work that one replica at a time runs (the lease rescuer, retention, each
-- bulk operation): each holds a session-level advisory lock, named by a
-- number (fixed, or a bulk operation's id), on a connection of its own
-- (store/advisory.py). Their transitions are in events.sql
-- (event_rescue_expired, event_delete_completed) and operator_actions.sql
-- (event_bulk_replay, event_bulk_ignore).

-- name: advisory_lock_try
-- One replica at a time: the others find the lock taken and skip their pass.
SELECT pg_try_advisory_lock(%(lock)s)

-- name: advisory_lock_release
SELECT pg_advisory_unlock(%(lock)s)

-- name: advisory_session_alive
-- A long-held lock (a bulk operation's carrier) is held as long as its
-- session lives: a round trip proves it before each unit of work.
SELECT 1
