"""The embedded cluster's private files (inboxd.pgpass, pg_hba.conf), never read or written through a link.

The cluster's folder belongs to `postgres`, and inboxd may run as root: a
link planted there by `postgres` must never make root read, truncate or chown
a file elsewhere. So every file is opened with O_NOFOLLOW, written under a
fresh name and renamed over the old one (a rename replaces a link, never its
target), and handed over with fchown on the descriptor.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

# Password authentication everywhere; pg_hba.conf as inboxd writes it when it
# takes over a cluster that trusted every local user.
HBA = """# Written by inboxd: password (scram-sha-256) authentication only. The secret is
# in inboxd.pgpass, beside this file, readable by its owner alone.
local   all             all                                     scram-sha-256
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
local   replication     all                                     scram-sha-256
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
"""


class UnsafeFileError(OSError):
    """A private file is a link or not a regular file: refused, never followed."""


def read_entries(path: Path) -> dict[str, str]:
    """user -> secret, from the file's lines (host:port:database:user:secret); {} when there is no file."""
    try:
        lines = read_private(path).splitlines()
    except FileNotFoundError:
        return {}
    entries = {}
    for line in lines:
        parts = line.split(":", 4)
        if len(parts) == 5:
            entries[parts[3]] = parts[4]
    return entries


def write_entries(path: Path, entries: dict[str, str], owner: tuple[int, int] | None = None) -> None:
    """One line per login, for any host and port: 127.0.0.1 or the socket's folder, the port picked at each start."""
    write_private(path, "".join(f"*:*:*:{user}:{secret}\n" for user, secret in entries.items()), owner)


def read_private(path: Path) -> str:
    """The file's text; UnsafeFileError when `path` is a link or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        if os.path.islink(path):
            raise _refused(path) from err
        raise
    with os.fdopen(fd, "r") as source:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refused(path)
        return source.read()


def write_private(path: Path, text: str, owner: tuple[int, int] | None = None) -> None:
    """Replaces `path` with `text`, readable by the owner alone from the first byte (libpq ignores looser files).

    `owner` (uid, gid) hands the new file over through its descriptor. An
    existing `path` that is a link or not a regular file is refused, not replaced.
    """
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise _refused(path)
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            os.fchmod(fd, 0o600)
            if owner is not None:
                os.fchown(fd, *owner)
            out.write(text)
        os.rename(fresh, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fresh)
        raise


def _refused(path: Path) -> UnsafeFileError:
    return UnsafeFileError(
        f"{path} is a symbolic link or not a regular file: inboxd refuses to follow it"
        " (the cluster's folder belongs to 'postgres'; remove it and start again)"
    )


def trusts_local_users(data_dir: Path) -> bool:
    """True for a cluster made by an older inboxd: its pg_hba.conf has a `trust` rule."""
    for line in read_private(data_dir / "pg_hba.conf").splitlines():
        words = line.split("#", 1)[0].split()
        if words and words[-1] == "trust":
            return True
    return False


def write_password_only_hba(data_dir: Path, owner: tuple[int, int] | None) -> None:
    """Replaces the cluster's pg_hba.conf with HBA: scram-sha-256 for every connection."""
    write_private(data_dir / "pg_hba.conf", HBA, owner)
