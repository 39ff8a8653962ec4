"""Finding the machine's PostgreSQL server binaries for the embedded cluster, newest version first."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

_REQUIRED = ("initdb", "pg_ctl", "postgres")
_INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found. Install them "
    "(Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server; "
    "macOS: brew install postgresql), set INBOXD_PG_BIN to the folder that holds them, "
    "or set DATABASE_URL to a PostgreSQL server you run yourself."
)


class EmbeddedPostgresError(RuntimeError):
    """The embedded PostgreSQL could not be set up; the message says what to do."""


def find_binaries() -> Path:
    """The folder holding initdb, pg_ctl and postgres, newest version first."""
    candidates: list[str] = []
    if os.environ.get("INBOXD_PG_BIN"):
        candidates.append(os.environ["INBOXD_PG_BIN"])
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    candidates += sorted(glob.glob("/usr/pgsql-*/bin"), key=_version_key, reverse=True)
    candidates += ["/opt/homebrew/bin", "/usr/local/bin"]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if all((Path(folder) / name).exists() for name in _REQUIRED):
            return Path(folder)
    raise EmbeddedPostgresError(_INSTALL_HINT)


def _version_key(path: str) -> tuple[int, ...]:
    digits = "".join(ch if ch.isdigit() else " " for ch in path).split()
    return tuple(int(d) for d in digits)
