"""Putting inboxd to work: the `inboxd` command, the embedded PostgreSQL, and the server's assembly and processes.

The only room that wires the others together: it reads the configuration,
starts the database, builds the use cases, adapters and background jobs, and
runs them in one process or under a supervisor of several.
"""
