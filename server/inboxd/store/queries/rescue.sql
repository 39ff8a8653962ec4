-- The lease rescuer's turn: one replica at a time. Its transition
-- (event_rescue_expired: PROCESSING events whose lease expired more than a
-- grace ago go back to PENDING, or to dead letters) is in events.sql.

-- name: rescue_try_lock
-- One replica at a time: the others find the lock taken and skip their pass.
SELECT pg_try_advisory_lock(%(lock)s)

-- name: rescue_unlock
SELECT pg_advisory_unlock(%(lock)s)
