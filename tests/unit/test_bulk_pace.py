"""A bulk operation's pace and paging, as plain functions: chunk sizes, waits, due-time spacing, page tokens."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from inboxd.domain.bulk_operations import (
    BulkPosition,
    chunk_size,
    decode_bulk_page_token,
    encode_bulk_page_token,
    pace_wait,
    spacing,
)
from inboxd.domain.errors import InvalidArgument


@pytest.mark.parametrize(
    ("rate", "size"), [(0.0, 500), (10_000.0, 500), (2_000.0, 500), (100.0, 25), (20.0, 5), (5.0, 1), (0.5, 1)]
)
def test_a_chunk_holds_at_most_a_quarter_seconds_worth_at_the_rate_and_at_least_one(rate: float, size: int) -> None:
    assert chunk_size(rate) == size


def test_the_next_chunk_waits_until_the_last_ones_events_took_their_time_at_the_rate() -> None:
    assert pace_wait(20.0, 5, 0.05) == pytest.approx(0.2)
    # A chunk that came late is not made up for: no negative wait, no burst.
    assert pace_wait(20.0, 5, 1.0) == 0.0
    assert pace_wait(0.0, 500, 0.0) == 0.0
    # A chunk whose matches had all moved on changed nothing: nothing to wait for.
    assert pace_wait(20.0, 0, 0.0) == 0.0


def test_a_chunks_replayed_events_come_due_one_rate_step_apart() -> None:
    assert spacing(4.0) == timedelta(milliseconds=250)
    assert spacing(0.0) == timedelta(0)


def test_a_page_token_names_the_last_operation_shown_and_refuses_anything_else() -> None:
    position = BulkPosition(datetime(2026, 12, 2, 6, 0, 0, 123456, tzinfo=UTC), uuid.uuid4())
    assert decode_bulk_page_token(encode_bulk_page_token(position)) == position
    for damaged in ("b1.!!", "b1." + "x" * 10, "p1.abc", ""):
        with pytest.raises(InvalidArgument) as refused:
            decode_bulk_page_token(damaged)
        assert refused.value.field == "page_token"
