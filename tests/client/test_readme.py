"""clients/python/README.md stays true: its code compiles and its retry table matches the code's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from inboxd_client.rpcs import ALL_RPCS

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"


def test_every_python_block_in_the_readme_compiles() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    for block in blocks:
        # Snippets may await at top level, as in an async handler's body.
        compile(block, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_readme_retry_table_says_what_the_rpc_table_does() -> None:
    rows = dict(re.findall(r"^\| (\w+) \| (yes|no) \|", README.read_text(), flags=re.M))
    assert rows == {rpc.name: "yes" if rpc.retry_safe else "no" for rpc in ALL_RPCS}
