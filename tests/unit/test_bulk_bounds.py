"""A bulk operation's bounds as plain functions: the rate's floor, and the caps on those running."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.domain.bulk_operations import (
    BulkAction,
    BulkFilter,
    BulkRequest,
    check_request,
    check_room,
    chunk_size,
    pace_wait,
    spacing,
)
from inboxd.domain.errors import InvalidArgument, TooManyRequests


def _request(rate: float) -> BulkRequest:
    return BulkRequest(BulkFilter(namespace_pattern="mail"), BulkAction.REPLAY, reason="outage", rate=rate)


@pytest.mark.parametrize("rate", [1e-300, 5e-324, 0.05, 0.0999, -0.1])
def test_a_rate_below_the_floor_is_refused_naming_the_floor(rate: float) -> None:
    with pytest.raises(InvalidArgument) as refused:
        check_request(_request(rate))
    assert refused.value.field == "rate" and "0.1 up to 10,000" in refused.value.problem


@pytest.mark.parametrize("rate", [0.0, 0.1, 1.0, 10_000.0])
def test_no_pace_and_rates_from_the_floor_to_the_ceiling_are_taken(rate: float) -> None:
    assert check_request(_request(rate)).rate == rate


def test_an_operation_stored_below_the_floor_runs_at_the_floor_rather_than_overflow() -> None:
    """Before the floor, 1e-300 was taken, and its first chunk failed: timedelta(seconds=1e300) overflows."""
    assert spacing(1e-300) == timedelta(seconds=10)
    assert pace_wait(1e-300, 1, 0.0) == pytest.approx(10.0)
    assert chunk_size(1e-300) == 1


def test_a_start_over_the_tokens_cap_or_the_deployments_is_refused_naming_the_cap() -> None:
    check_room(actor="tenant-a", mine=3, everyone=31, per_token=4, total=32)
    with pytest.raises(TooManyRequests, match=r"'tenant-a' has 4 bulk operations running.*PER_TOKEN=4"):
        check_room(actor="tenant-a", mine=4, everyone=4, per_token=4, total=32)
    with pytest.raises(TooManyRequests, match=r"32 bulk operations are running.*INBOXD_BULK_MAX_RUNNING=32"):
        check_room(actor="tenant-a", mine=0, everyone=32, per_token=4, total=32)
