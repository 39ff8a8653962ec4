"""The README's first page works after `make run` alone: every command it shows can be run as shown."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, flags=re.DOTALL)


def test_every_buf_command_uses_the_installed_buf_never_an_npm_package_named_buf() -> None:
    commands = [
        line for block in _shell_blocks() for line in block.splitlines() if re.search(r"\bnpx\b.*\bbuf\b", line)
    ]
    assert commands
    assert all("--no-install" in line for line in commands), commands


def test_buf_is_installed_before_its_first_use() -> None:
    first = next(block for block in _shell_blocks() if "buf curl" in block)
    lines = [line.strip() for line in first.splitlines()]
    install = next(i for i, line in enumerate(lines) if line.startswith("npm ci"))
    assert install < next(i for i, line in enumerate(lines) if "buf curl" in line)
