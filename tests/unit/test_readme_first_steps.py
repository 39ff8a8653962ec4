"""The README's first page works after `make run` alone: every command it shows can be run as shown."""

from __future__ import annotations

import re
import tomllib
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


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_two_commands_come_first_and_say_how_to_change_the_port() -> None:
    # The section once opened on 13 lines of prerequisites that ended on a dangling ":".
    two = _section("Two commands")
    assert two.lstrip().startswith("```sh\nmake run"), two[:200]
    assert "INBOXD_LISTEN=" in two.split("make test` needs more")[0]


def test_the_python_and_node_workers_claim_the_same_namespace() -> None:
    python = [n.strip("'\"") for n in re.findall(r"namespaces=\[([^\]]*)\]", _section("Workers"))]
    node = [n.strip("'\"") for n in re.findall(r"namespaces: \[([^\]]*)\]", _section("Workers"))]
    assert python and node and set(python) == set(node), (python, node)


def test_every_edge_route_the_readme_shows_loads() -> None:
    from inboxd_edge.config import config_from_data

    blocks = re.findall(r"```toml\n(.*?)```", README, flags=re.DOTALL)
    assert blocks
    for block in blocks:
        data = tomllib.loads(block)
        environ = {name: "whsec_test" for route in data["routes"] for name in route.get("secrets_env", [])}
        assert config_from_data(data, environ).routes
