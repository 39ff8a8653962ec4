"""An older commit's server, checked out beside this tree, for a figure measured against the code before a change.

`git worktree add --detach` puts the commit in a folder of its own under
/tmp; its server runs with PYTHONPATH naming that folder's server/ and
clients/python/src, ahead of .venv's editable installs of this tree. That
only holds if those installs are found after PYTHONPATH, so the checkout
asks the same interpreter with the same environment where `inboxd` and
`inboxd_client` come from, and refuses to go on if either is this tree's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Checkout:
    commit: str
    folder: Path
    # Where the checkout's interpreter found each package: proof the old code is what runs.
    imported: dict[str, str]

    @property
    def env(self) -> dict[str, str]:
        """The environment of a server of this checkout."""
        return {"PYTHONPATH": python_path(self.folder)}


def python_path(folder: Path) -> str:
    return os.pathsep.join(str(folder / part) for part in ("server", "clients/python/src"))


def imported_from(env: dict[str, str]) -> dict[str, str]:
    """Where `python -c 'import inboxd, inboxd_client'` finds them with `env` over this process's environment."""
    shown = subprocess.run(
        [sys.executable, "-c", "import inboxd, inboxd_client; print(inboxd.__file__); print(inboxd_client.__file__)"],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    return {"inboxd": shown[0], "inboxd_client": shown[1]}


def check_imports(imported: dict[str, str], folder: Path) -> None:
    """Raises unless every package was found inside `folder`."""
    strays = {name: path for name, path in imported.items() if not Path(path).resolve().is_relative_to(folder)}
    if strays:
        raise RuntimeError(f"with PYTHONPATH at {folder}, these still come from elsewhere: {strays}")


@contextlib.contextmanager
def checked_out(commit: str) -> Iterator[Checkout]:
    """`commit` in a detached worktree of this repository for the block, removed after it."""
    folder = Path(tempfile.mkdtemp(prefix=f"inboxd-bench-{commit}-")).resolve()
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), commit],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        checkout = Checkout(commit, folder, {})
        imported = imported_from(checkout.env)
        check_imports(imported, folder)
        yield Checkout(commit, folder, imported)
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], check=False, capture_output=True
        )
