"""Every SQL statement inboxd runs, and the only package that imports psycopg."""
