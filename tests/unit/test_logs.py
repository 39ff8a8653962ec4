"""Log formatting: event references, JSON lines, logfmt."""

from __future__ import annotations

import hashlib
import io
import json
import logging

from inboxd.observability.logs import JsonFormatter, LogfmtFormatter, configure_logging, event_ref, log_fields


def test_event_ref_is_twelve_hex_digits_of_the_identity_hash() -> None:
    expected = hashlib.sha256(b"stripe\0alice@example.com").hexdigest()[:12]
    assert event_ref("stripe", "alice@example.com") == expected
    # The separator keeps ("a", "bc") and ("ab", "c") apart.
    assert event_ref("a", "bc") != event_ref("ab", "c")


def _record(message: str, **fields: object) -> logging.LogRecord:
    record = logging.LogRecord("inboxd.events", logging.INFO, __file__, 1, message, None, None)
    record.fields = fields
    return record


def test_json_lines_carry_the_message_and_the_fields_without_clobbering_the_base_keys() -> None:
    line = JsonFormatter().format(_record("event claimed", event="abc123", attempt=2, msg="spoof"))
    parsed = json.loads(line)
    assert (parsed["msg"], parsed["event"], parsed["attempt"], parsed["level"]) == (
        "event claimed",
        "abc123",
        2,
        "info",
    )
    assert parsed["field_msg"] == "spoof"
    assert parsed["ts"].endswith("Z")


def test_logfmt_quotes_values_with_spaces_or_quotes() -> None:
    line = LogfmtFormatter().format(_record("event failed, will retry", event="abc", note='say "hi"'))
    assert 'msg="event failed, will retry"' in line
    assert "event=abc" in line
    assert 'note="say \\"hi\\""' in line


def test_configure_logging_writes_json_when_the_stream_is_not_a_terminal() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging(stream, level="debug")
        log_fields(logging.getLogger("inboxd.test"), logging.DEBUG, "hello", n=1)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert json.loads(stream.getvalue())["n"] == 1


CONTROLS = "\x1b[31m" + "\r" + "\n" + "\x00" + "\x7f" + "\x9b" + "\x85" + "\u202e" + "\u2028"


def test_logfmt_escapes_every_control_character_a_caller_can_send() -> None:
    line = LogfmtFormatter().format(_record("event accepted", event_type=f"order{CONTROLS}.paid", bare="a\x1bb"))
    assert line.isprintable()
    assert 'event_type="order\\u001b[31m\\r\\n\\u0000\\u007f\\u009b\\u0085\\u202e\\u2028.paid"' in line
    assert 'bare="a\\u001bb"' in line


def test_json_lines_escape_every_control_character_and_stay_json() -> None:
    line = JsonFormatter().format(_record("event accepted", event_type=f"order{CONTROLS}.paid", lone="\ud800"))
    assert line.isprintable()
    parsed = json.loads(line)
    assert parsed["event_type"] == f"order{CONTROLS}.paid"
    assert parsed["lone"] == "\ud800"
