"""A resume's ramp ends at its rate, not in a flood (DESIGN, Flow control; docs/operations.md's own example).

`flow resume ... --ramp 10m --ramp-rate 200` on a rule with no rate of its
own: the ramp's rate holds after the ramp, until the operator sets another.
Through SetFlowControl on the server whose time is the `clock` fixture, so
the ramp is passed by moving the clock, never by sleeping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import FakeClock
from tests.integration.admin_fixtures import clocked_admin
from tests.integration.helpers import seconds
from tests.integration.test_flow_claims import accept_many, claim
from tests.integration.test_flow_control import remove_rules

__all__ = ["clocked_admin"]

RAMP_RATE = 10.0


@pytest.fixture(autouse=True)
async def own_rules_removed(db: Database, ns: str) -> AsyncIterator[None]:
    yield
    await remove_rules(db, ns)


async def resume_with_a_ramp(admin: InboxAdminServiceStub, pattern: str) -> admin_pb2.SetFlowControlResponse:
    """The docs' example, scaled down: a 10 s ramp to RAMP_RATE a second, with no --rate."""
    answer: admin_pb2.SetFlowControlResponse = await admin.SetFlowControl(
        admin_pb2.SetFlowControlRequest(
            pattern=pattern, paused=False, resume_ramp=seconds(10), ramp_rate=RAMP_RATE, reason="provider recovered"
        )
    )
    return answer


async def test_after_a_ramp_without_a_rate_claims_stay_at_the_ramps_rate(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, clock: FakeClock, ns: str
) -> None:
    paused = f"{ns}/mail"
    await clocked_admin.SetFlowControl(admin_pb2.SetFlowControlRequest(pattern=paused, paused=True, reason="outage"))
    await accept_many(work, paused, 200)
    answer = await resume_with_a_ramp(clocked_admin, paused)
    # The rate the ramp climbs to is the rule's from now on, and says so.
    assert answer.after.rate == RAMP_RATE
    clock.advance(11)  # the ramp is over
    per_second = []
    for _ in range(4):
        events = await claim(work, [paused], max_events=100)
        per_second.append(len(events))
        clock.advance(1)
    # Before: [100, 100, 0, 0] (the whole backlog at the ramp's end, 100 a Claim). A second's worth now.
    assert all(count <= RAMP_RATE for count in per_second), per_second
    assert per_second[1:] == [RAMP_RATE] * 3, per_second


async def test_a_rate_the_operator_sets_replaces_the_ramps(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, clock: FakeClock, ns: str
) -> None:
    paused = f"{ns}/mail"
    await clocked_admin.SetFlowControl(admin_pb2.SetFlowControlRequest(pattern=paused, paused=True, reason="outage"))
    await accept_many(work, paused, 100)
    await resume_with_a_ramp(clocked_admin, paused)
    clock.advance(11)
    await claim(work, [paused], max_events=100)
    # The operator lifts the rate once the ramp is over: the backlog goes at once.
    lifted = await clocked_admin.SetFlowControl(
        admin_pb2.SetFlowControlRequest(pattern=paused, rate=0.0, reason="provider fine")
    )
    assert lifted.after.rate == 0  # no rate limit
    clock.advance(1)
    assert len(await claim(work, [paused], max_events=100)) == 100 - RAMP_RATE
