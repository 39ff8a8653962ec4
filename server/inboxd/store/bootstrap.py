"""Creating the database itself, before there is a pool or a schema."""

from __future__ import annotations

import psycopg
from psycopg import sql


def create_database_if_absent(admin_conninfo: str, name: str) -> None:
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def set_superuser_password(admin_conninfo: str, password: str) -> None:
    """Stores `password` (as a SCRAM verifier) for the connected role; the cluster must still let us in."""
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(sql.SQL("ALTER ROLE CURRENT_USER PASSWORD {}").format(sql.Literal(password)))
