-- Passes that one replica at a time runs (the lease rescuer, retention): each
-- holds a session-level advisory lock, named by a fixed number, on a
-- connection of its own (store/advisory.py). Their transitions are in
-- events.sql (event_rescue_expired, event_delete_completed).

-- name: advisory_lock_try
-- One replica at a time: the others find the lock taken and skip their pass.
SELECT pg_try_advisory_lock(%(lock)s)

-- name: advisory_lock_release
SELECT pg_advisory_unlock(%(lock)s)
