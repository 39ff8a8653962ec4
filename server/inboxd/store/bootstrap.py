"""Creating the database itself, and the role that owns it, before there is a pool or a schema."""

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


# Each kind of object a migration makes in the public schema, and how to give it to another owner.
_OWNED_IN_PUBLIC = sql.SQL(
    """
    SELECT 'TABLE', format('%I', c.relname) FROM pg_class c
     WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
       AND c.relowner <> {role}::regrole
       -- An identity column's sequence follows its table (and refuses an owner of its own).
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                                  AND d.deptype IN ('a', 'i'))
    UNION ALL
    SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, p.oid::regprocedure::text FROM pg_proc p
     WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> {role}::regrole
    UNION ALL
    SELECT 'TYPE', format('%I', t.typname) FROM pg_type t
     WHERE t.typnamespace = 'public'::regnamespace AND t.typtype IN ('e', 'd', 'r') AND t.typowner <> {role}::regrole
    """
)


def ensure_owner_role(admin_conninfo: str, database_conninfo: str, role: str, password: str | None) -> None:
    """Makes `role` a plain login (no superuser, no CREATEDB/CREATEROLE/REPLICATION) that owns the database.

    The database and everything in its public schema belong to `role`, so inboxd
    runs, and migrates, without superuser rights. A database made by an older
    inboxd as the superuser is handed over object by object (REASSIGN OWNED
    cannot take objects from the bootstrap superuser). `password` None keeps
    the role's password; the caller sets it when it has just minted one.
    """
    name = sql.Identifier(role)
    database = psycopg.conninfo.conninfo_to_dict(database_conninfo)["dbname"]
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
        verb = sql.SQL("ALTER ROLE") if exists else sql.SQL("CREATE ROLE")
        limits = sql.SQL("LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS")
        secret = sql.SQL(" PASSWORD {}").format(sql.Literal(password)) if password is not None else sql.SQL("")
        conn.execute(sql.SQL("{} {} {}{}").format(verb, name, limits, secret))
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(str(database)), name))
        else:
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(str(database)), name))
    admin_in_database = psycopg.conninfo.make_conninfo(admin_conninfo, dbname=database)
    with psycopg.connect(admin_in_database, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(name))
        owned = conn.execute(_OWNED_IN_PUBLIC.format(role=sql.Literal(role))).fetchall()
        for kind, identity in owned:
            conn.execute(sql.SQL("ALTER {} {} OWNER TO {}").format(sql.SQL(kind), sql.SQL(identity), name))
