"""The reliability suite: processes killed, the database taken away, workers raced, every event accounted for."""
