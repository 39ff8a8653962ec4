"""The admin CLI's rendering: ages, tables, JSON with inlined payloads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.domain.operator_views import format_age
from inboxd.serving.admin_output import as_json, event_text, table
from inboxd_client.v1 import admin_pb2, types_pb2


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(7, "7s"), (252, "4m12s"), (7500, "2h5m"), (3 * 86400 + 4 * 3600 + 59, "3d4h")],
)
def test_age_is_short_and_readable(seconds: int, shown: str) -> None:
    assert format_age(timedelta(seconds=seconds)) == shown
    assert format_age(None) == "-"


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


def test_the_event_text_shows_the_action_history_and_what_each_record_did() -> None:
    event = admin_pb2.Event(
        action_history=[
            admin_pb2.ActionHistoryEntry(
                action="send:v1", state=types_pb2.ACTION_STATE_INTENDED, fencing_token=2, applied=True
            ),
            admin_pb2.ActionHistoryEntry(
                action="send:v1", state=types_pb2.ACTION_STATE_FAILED, fencing_token=1, detail="late"
            ),
        ]
    )
    history = event_text(event).split("action history\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(history) == 3  # the header, then one line per record, oldest first
    assert history[1].split()[:4] == ["send:v1", "INTENDED", "2", "applied"]
    assert "kept only" in history[2] and "late" in history[2]
