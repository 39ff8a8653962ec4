"""The edge's default address is not the console's, and an address in use is refused in one line."""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from pathlib import Path

from inboxd_edge.config import DEFAULT_LISTEN, config_from_data
from tests.edge.rig import routes_config

ROOT = Path(__file__).resolve().parents[2]
ROUTES = """
[inboxd]
target = "127.0.0.1:1"

[[routes]]
path = "/hooks/stripe"
scheme = "stripe"
secrets = ["whsec_listen_test"]
namespace = "stripe/main"
allowed_types = ["charge.refunded"]
"""


def test_the_default_address_is_not_the_readmes_console_address() -> None:
    config = config_from_data(routes_config("127.0.0.1:1"), {})
    assert config.listen == DEFAULT_LISTEN
    consoles = set(re.findall(r"INBOXD_CONSOLE_LISTEN=(127\.0\.0\.1:\d+)", (ROOT / "README.md").read_text()))
    assert consoles and DEFAULT_LISTEN not in consoles


async def test_an_address_in_use_is_refused_in_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        where = f"127.0.0.1:{taken.getsockname()[1]}"
        config = tmp_path / "edge.toml"
        config.write_text(ROUTES)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inboxd_edge", "--config", str(config), "--listen", where,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, stderr.decode()
    assert lines[0].startswith(f"inboxd-edge: cannot listen on {where}: ")
    assert "--listen" in lines[0] and "Traceback" not in stderr.decode()
