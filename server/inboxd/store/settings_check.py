"""A look at the database's durability settings at start-up, with a warning for each that voids the promise.

inboxd answers OK only after COMMIT, and an acknowledged event must survive a
crash. With `fsync=off` a crash of the database's machine can lose or corrupt
committed rows; with `synchronous_commit=off` COMMIT answers before its WAL
is on disk, so a crash of PostgreSQL loses the last acknowledged events.
inboxd still serves on such a database (a throwaway test cluster, say), but says so.
"""

from __future__ import annotations

import logging

from inboxd.domain.errors import Unavailable
from inboxd.observability.logs import log_fields
from inboxd.store.database import Connection, Database
from inboxd.store.queries import QUERIES

log = logging.getLogger(__name__)

# Setting -> what is lost when it is off.
_RISKS = {
    "fsync": "a crash of the database's machine can lose or corrupt acknowledged events; turn it on for data you keep",
    "synchronous_commit": (
        "COMMIT answers before its WAL is on disk, so a database crash loses the last acknowledged events; "
        "set it to on (or remote_apply with a synchronous standby)"
    ),
}


async def _read(conn: Connection) -> dict[str, str]:
    cur = await conn.execute(QUERIES["settings_durability"])
    row = await cur.fetchone()
    assert row is not None and cur.description is not None
    return {column.name: str(value) for column, value in zip(cur.description, row, strict=True)}


def durability_warnings(settings: dict[str, str]) -> list[str]:
    """One sentence for each setting that is off and should not be; empty when none is."""
    return [f"PostgreSQL runs with {name}=off: {risk}" for name, risk in _RISKS.items() if settings.get(name) == "off"]


async def warn_if_not_durable(db: Database) -> list[str]:
    """Logs a warning for each setting that voids durability, and answers them. Never stops start-up."""
    try:
        settings = await db.run(_read, transaction=False)
    except Unavailable as exc:
        log.debug("durability settings not read: %s", exc)
        return []
    warnings = durability_warnings(settings)
    for warning in warnings:
        log_fields(log, logging.WARNING, warning)
    return warnings
