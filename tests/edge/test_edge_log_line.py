"""The edge's log line: every value quoted, so an unsigned header can neither pose as a field nor break the line."""

from __future__ import annotations

from inboxd_edge.app import log_line


def test_a_delivery_header_cannot_spoof_fields_of_the_log_line() -> None:
    line = log_line(route="std", status="401", delivery='x route=admin status=200 outcome=accepted"')
    assert line == 'route="std" status="401" delivery="x route=admin status=200 outcome=accepted\\""'
    # Splitting on the quoted values leaves exactly the three fields the edge wrote.
    assert line.count('="') == 3


def test_control_characters_are_escaped_so_a_value_cannot_start_a_line_or_drive_the_terminal() -> None:
    hostile = "a\rb\nc\x1b[2Jd\x00e\x7ff\x85g\u2028h\\i"
    line = log_line(type=hostile)
    assert line == 'type="a\\x0db\\x0ac\\x1b[2Jd\\x00e\\x7ff\\x85g\\u2028h\\\\i"'
    assert all(ch.isprintable() for ch in line)
