"""ListEvents page tokens: opaque, round-trip exactly, and refuse anything else as INVALID_ARGUMENT."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inboxd.console.pages import event_ref, parse_event_ref
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_views import ListPosition
from inboxd.domain.page_tokens import decode_page_token, encode_page_token


def test_a_token_round_trips_to_the_same_position_to_the_microsecond() -> None:
    position = ListPosition(datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=UTC), "stripe/acct_1", "evt_é/ü 1")
    token = encode_page_token(position)
    assert decode_page_token(token) == position
    assert "evt_" not in token  # opaque: not the key in plain text


@pytest.mark.parametrize(
    "token",
    [
        "garbage",
        "p1.",
        "p1.!!!",
        "p1." + "W10",  # base64 of "[]"
        "p1.eyJhIjoxfQ",  # base64 of '{"a":1}'
        "p1.WyJ4IiwibnMiLCJrIl0",  # ["x","ns","k"]: not a number of microseconds
    ],
)
def test_a_damaged_token_is_invalid_argument_naming_the_field(token: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        decode_page_token(token)
    assert caught.value.field == "page_token"


@pytest.mark.parametrize(("namespace", "event_key"), [("a\x00b", "k"), ("ns", "k\x00"), ("\ud800", "k")])
def test_a_token_holding_what_postgresql_cannot_take_is_refused_naming_page_token(
    namespace: str, event_key: str
) -> None:
    forged = encode_page_token(ListPosition(datetime(2026, 3, 1, tzinfo=UTC), namespace, event_key))
    with pytest.raises(InvalidArgument) as refused:
        decode_page_token(forged)
    assert refused.value.field == "page_token"


@pytest.mark.parametrize(("namespace", "event_key"), [("a\x00b", "k"), ("ns", "k\x00"), ("", "k")])
def test_a_console_event_reference_holding_a_nul_is_refused_naming_the_event(namespace: str, event_key: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        parse_event_ref(event_ref(namespace, event_key))
    assert refused.value.field == "event"
