"""The account the embedded PostgreSQL runs as: `postgres` when inboxd is root (initdb refuses root), else inboxd's own.

As root, the cluster's folder and files belong to `postgres`, and every
folder above the data directory must be searchable by it.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path


def runs_as_postgres_user() -> bool:
    return os.geteuid() == 0


def private_parent(path: Path) -> Path | None:
    """The first existing parent folder others cannot search (so neither can `postgres`), if any."""
    for parent in path.resolve().parents:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            return parent
    return None


def postgres_owner() -> tuple[int, int] | None:
    """(uid, gid) of `postgres` when running as root, whose files the cluster's are; else None."""
    if not runs_as_postgres_user():
        return None
    owner = pwd.getpwnam("postgres")
    return owner.pw_uid, owner.pw_gid


def give_to_postgres(*paths: Path) -> None:
    """As root, the cluster's files belong to `postgres` (root still reads them)."""
    owner = postgres_owner()
    if owner is not None:
        for path in paths:
            os.chown(path, *owner)
