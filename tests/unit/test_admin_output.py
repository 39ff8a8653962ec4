"""The admin CLI's rendering: ages, tables, JSON with inlined payloads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.admin_output import age, as_json, table
from inboxd_client.v1 import admin_pb2


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(7, "7s"), (252, "4m12s"), (7500, "2h5m"), (3 * 86400 + 4 * 3600 + 59, "3d4h")],
)
def test_age_is_short_and_readable(seconds: int, shown: str) -> None:
    assert age(timedelta(seconds=seconds)) == shown
    assert age(None) == "-"


def test_table_aligns_columns_and_keeps_each_cell_on_one_short_line() -> None:
    text = table(["A", "LONGER"], [["x", "multi\nline"], ["yyyy", "z" * 100]])
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].index("LONGER") == lines[1].index("multi line") == lines[2].index("zz")
    assert lines[2].endswith("…")
    assert len(lines[2]) < 80


def test_json_inlines_payloads_as_json_values_at_any_depth() -> None:
    event = admin_pb2.Event(
        payload=b'{"a": 1}',
        conflicts=[admin_pb2.ConflictingCopy(payload=b"[2]", metadata={"k": "v"})],
        metadata={"delivery": "d1"},
    )
    out = as_json(event)
    assert out["payload"] == {"a": 1}
    assert out["conflicts"][0]["payload"] == [2]
    assert out["conflicts"][0]["metadata"] == {"k": "v"}
    assert out["metadata"] == {"delivery": "d1"}
