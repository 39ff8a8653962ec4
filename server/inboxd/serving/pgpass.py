"""The embedded cluster's libpq password file: one line per login, readable by its owner alone."""

from __future__ import annotations

import os
from pathlib import Path


def read_entries(path: Path) -> dict[str, str]:
    """user -> secret, from the file's lines (host:port:database:user:secret); {} when there is no file."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    entries = {}
    for line in lines:
        parts = line.split(":", 4)
        if len(parts) == 5:
            entries[parts[3]] = parts[4]
    return entries


def write_entries(path: Path, entries: dict[str, str]) -> None:
    """One line per login, for any host and port: 127.0.0.1 or the socket's folder, the port picked at each start."""
    write_private(path, "".join(f"*:*:*:{user}:{secret}\n" for user, secret in entries.items()))


def write_private(path: Path, text: str) -> None:
    """Writes `text` readable by the owner alone, from the first byte (libpq ignores looser files)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
