-- The database's own settings that decide whether a commit survives a crash.

-- name: settings_durability
-- As this session sees them: synchronous_commit can be changed per role or
-- database, and inboxd's transactions run with what its sessions see.
SELECT current_setting('fsync') AS fsync,
       current_setting('synchronous_commit') AS synchronous_commit
