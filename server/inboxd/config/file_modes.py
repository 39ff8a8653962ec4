"""Files that grant access (the tokens file, the TLS key) are refused when anybody may rewrite them.

As sshd refuses an authorized_keys file that others can write: whoever can
write the tokens file can mint an admin token, and whoever can write the key
can swap it for one of theirs. Readable by others is left alone (a Kubernetes
Secret is mounted 0644 by default); writable by others never is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def others_may_rewrite(path: Path) -> str | None:
    """Why others could rewrite `path` (it or its folder writable by every local account), or None."""
    try:
        mode = os.stat(path).st_mode
        folder = path.resolve().parent
        folder_mode = os.stat(folder).st_mode
    except OSError:
        return None  # the reader says what is wrong with a file it cannot open
    if mode & stat.S_IWOTH:
        return f"{path} is writable by every local account (mode {stat.S_IMODE(mode):04o}): chmod o-w {path}"
    if folder_mode & stat.S_IWOTH and not folder_mode & stat.S_ISVTX:
        return (
            f"{path}'s folder {folder} is writable by every local account (mode {stat.S_IMODE(folder_mode):04o}),"
            f" so anybody may replace the file: chmod o-w {folder}"
        )
    return None
