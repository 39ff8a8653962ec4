"""The admin CLI's rendering: ages, tables, JSON with inlined payloads."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.domain.operator_views import format_age
from inboxd.serving.admin_output import as_json, dead_letters_table, event_text, events_table, stats_table, table
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


def _payload_part(event: admin_pb2.Event) -> list[str]:
    return event_text(event).rsplit("\n\n", 1)[1].splitlines()


def test_the_event_text_shows_the_payload_by_its_content_type_with_the_type_and_size() -> None:
    as_json = _payload_part(admin_pb2.Event(payload=b'{"b":1,"a":[2]}'))
    assert as_json == ["payload (application/json, 15 bytes)", "{", '  "b": 1,', '  "a": [', "    2", "  ]", "}"]
    form = admin_pb2.Event(payload=b"To=%2B1555&Body=two+words&To=x", content_type="application/x-www-form-urlencoded")
    assert _payload_part(form) == [
        "payload (application/x-www-form-urlencoded, 30 bytes)",
        "To    +1555",
        "Body  two words",
        "To    x",
    ]
    text = admin_pb2.Event(payload=b"<a>\n  b\n</a>", content_type="text/xml; charset=utf-8")
    assert _payload_part(text) == ["payload (text/xml; charset=utf-8, 12 bytes)", "<a>", "  b", "</a>"]
    binary = admin_pb2.Event(payload=b"\x89PNG\r\n\x1a\n", content_type="image/png")
    assert _payload_part(binary) == [
        "payload (image/png, 8 bytes, as hex)",
        "00000000  89 50 4e 47 0d 0a 1a 0a                           |.PNG....|",
    ]
    assert "content type        image/png" in event_text(binary)


def test_the_event_text_says_why_a_payload_is_hex_and_how_much_it_left_out() -> None:
    bad = _payload_part(admin_pb2.Event(payload=b"\xff" * 4100, content_type="text/plain"))
    assert bad[0] == "payload (text/plain, 4,100 bytes, as hex)"
    assert bad[-1] == "(does not decode as utf-8: shown as hex; 4 of 4,100 bytes not shown (the first 4,096 are))"
    assert _payload_part(admin_pb2.Event()) == ["payload (application/json)", "- (dropped by payload retention)"]


def test_a_payload_cannot_drive_the_terminal() -> None:
    hostile = b"\x1b]0;owned\x07\x1b[2J\xc2\x9b31m"
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        shown = event_text(admin_pb2.Event(payload=b"x=" + hostile, content_type=content_type))
        assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
        assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b31m" in shown
    hostile_type = "text/plain; x=\x1b[2J"
    typed = event_text(
        admin_pb2.Event(content_type=hostile_type, conflicts=[admin_pb2.ConflictingCopy(content_type=hostile_type)])
    )
    assert "\x1b" not in typed and typed.count("text/plain; x=\\x1b[2J") == 3
    in_json = event_text(admin_pb2.Event(payload='{"a": "\u009b31m"}'.encode()))
    assert "\x9b" not in in_json and '"a": "\\x9b31m"' in in_json


def test_conflicting_copies_payloads_are_shown_by_their_own_content_type() -> None:
    event = admin_pb2.Event(
        payload=b"{}",
        conflicts=[
            admin_pb2.ConflictingCopy(
                event_type="sms", payload=b"Body=hi", content_type="application/x-www-form-urlencoded"
            ),
            admin_pb2.ConflictingCopy(event_type="sms", payload_sha256=b"\xab" * 32, payload_size=9),
        ],
    )
    text = event_text(event)
    rows = text.split("conflicting copies\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert rows[0].split() == ["TYPE", "RECEIVED", "CONTENT", "TYPE", "PAYLOAD"]
    assert rows[1].split()[2:] == ["application/x-www-form-urlencoded", "copy", "1,", "below"]
    assert rows[2].split()[2:] == ["application/json", "9", "bytes,", "sha256", "abababababababab"]
    assert "conflicting copy 1's payload (application/x-www-form-urlencoded, 7 bytes)\nBody  hi" in text


def test_json_output_inlines_each_payload_by_its_content_type() -> None:
    event = admin_pb2.Event(
        payload=b"a=1&a=2",
        content_type="application/x-www-form-urlencoded",
        conflicts=[
            admin_pb2.ConflictingCopy(payload=b"\xff\x00", content_type="application/octet-stream"),
            admin_pb2.ConflictingCopy(payload=b"caf\xe9", content_type="text/plain; charset=latin-1"),
            admin_pb2.ConflictingCopy(payload=b'{"n": 1}', content_type="application/cloudevents+json"),
        ],
    )
    out = as_json(event)
    assert out["payload"] == "a=1&a=2"
    binary, latin, cloud = out["conflicts"]
    assert (binary["payload"], binary["payload_encoding"]) == ("/wA=", "base64")
    assert latin["payload"] == "café" and "payload_encoding" not in latin
    assert cloud["payload"] == {"n": 1}


HOSTILE = "evil\x1b]0;owned\x07\rfake\u202egnp.exe\u200b"


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c in "\x1b\x07\r\u202e\u200b"]


def test_show_and_stats_print_no_terminal_controls_from_any_field() -> None:
    """Types, errors, worker ids, actions, references and namespaces are anybody's text: printed as escapes."""
    summary = admin_pb2.EventSummary(
        namespace=HOSTILE, event_key=HOSTILE, event_type=HOSTILE, last_error=HOSTILE, worker_id=HOSTILE
    )
    event = admin_pb2.Event(
        summary=summary,
        disposition_reason=HOSTILE,
        claims=[admin_pb2.ClaimRecord(worker_id=HOSTILE, outcome=HOSTILE)],
        actions=[types_pb2.ActionRecord(action=HOSTILE, external_ref=HOSTILE, idempotency_key=HOSTILE)],
        metadata={HOSTILE: HOSTILE},
    )
    stats = admin_pb2.StatsResponse(namespaces=[admin_pb2.NamespaceStats(namespace=HOSTILE, flow_rule=HOSTILE)])
    for shown in (event_text(event), stats_table(stats), events_table([summary]), dead_letters_table([summary])):
        assert _raw_controls(shown) == []
        # A table cell is one line (its CR became a space); a field keeps it as an escape.
        assert "\\u001b]0;owned\\u0007" in shown and "fake\\u202egnp.exe\\u200b" in shown
