"""The protocol's invariants against the real server: a Hypothesis state machine.

Random sequences of Accept, Claim by three workers, RenewLease, Complete, Fail,
Release, RecordActionOutcome and time passing (the clock is moved, never
slept) run against a real inboxd on a real PostgreSQL. After every step each
answer (status code and returned state) is compared with the reference model
in protocol_reference.py, and the stored rows are read back to check what
model/claims.pml and model/actions.pml check: one open claim per
event and it is the current one, attempts counted as the design says, fencing
tokens strictly increasing, one idempotency key per action.

Workers keep every claim they were ever given, so stalled workers come back
with superseded tokens as often as current ones. The machine runs in a thread
of its own with a blocking channel, while the server keeps the test's loop.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import grpc
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd.store.queries import QUERIES
from inboxd_client.v1 import admin_pb2, inbox_pb2, types_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import CLOCKED_SETTINGS, FakeClock
from tests.integration import protocol_reference as ref
from tests.integration.helpers import accept_request, seconds

WORKERS = ("w0", "w1", "w2")
# Two events exist from the start; a third may arrive later.
FIRST_KEYS = ("e0", "e1")
KEYS = (*FIRST_KEYS, "e2")
ACTION = "send:v1"
LEASE = timedelta(seconds=30)
# Each call that sets a due time comes a millisecond after the last, so no two
# events are due at the same instant. Among equal due times the server's order
# is its heap's, which differs between Hypothesis' replays of one sequence; a
# different pick then changes which later Claims find nothing, and Hypothesis
# reports the whole run flaky rather than checking it.
TICK = 0.001

# 200 sequences of up to 30 steps, the same ones on every run: a failure replays.
SEQUENCES = settings(
    max_examples=200,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# Every event of the namespace with its open claims and its one action, as stored.
READ_BACK = """
SELECT e.event_key, e.state, e.attempt,
       ARRAY(SELECT c.fencing_token FROM inbox_claims AS c
             WHERE c.namespace = e.namespace AND c.event_key = e.event_key AND c.ended_at IS NULL
             ORDER BY c.fencing_token),
       a.state, a.fencing_token, a.idempotency_key
FROM inbox_events AS e
LEFT JOIN inbox_actions AS a ON a.namespace = e.namespace AND a.event_key = e.event_key
WHERE e.namespace = %(namespace)s
"""
EVENT_STATES = {"pending": ref.PENDING, "processing": ref.PROCESSING, "completed": ref.COMPLETED,
                "dead_lettered": ref.DEAD_LETTERED}  # fmt: skip
ACTION_STATES = {"intended": ref.INTENDED, "succeeded": ref.SUCCEEDED, "failed": ref.FAILED, "unknown": ref.UNKNOWN}


def when(stamp: Any) -> datetime:
    moment: datetime = stamp.ToDatetime(tzinfo=UTC)
    return moment


class ProtocolMachine(RuleBasedStateMachine):
    """Claims, leases and fences; the action ledger is added by the subclass below."""

    inbox: ClassVar[InboxServiceStub]
    admin: ClassVar[InboxAdminServiceStub]
    clock: ClassVar[FakeClock]
    db: ClassVar[Database]
    loop: ClassVar[asyncio.AbstractEventLoop]

    claims = Bundle("claims")

    def __init__(self) -> None:
        super().__init__()
        self.ns = f"protocol/{uuid.uuid4().hex[:12]}"
        self.model = ref.Inbox(max_attempts=CLOCKED_SETTINGS.max_attempts, lease=LEASE)
        self.last_fencing = 0

    def call(self, what: str, method: Any, request: Any) -> tuple[grpc.StatusCode, Any]:
        try:
            return grpc.StatusCode.OK, method(request, timeout=10)
        except grpc.RpcError as error:
            code: grpc.StatusCode = error.code()
            assert code in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION), (
                f"{what}: {code.name} {error.details()}"
            )
            return code, None

    def fence(self, claim: ref.Claim) -> dict[str, str]:
        return {"namespace": self.ns, "event_key": claim.key, "claim_token": claim.token}

    @staticmethod
    def expect(what: str, got: grpc.StatusCode, want: grpc.StatusCode) -> None:
        assert got == want, f"{what}: the server answered {got.name}, the design says {want.name}"

    @initialize()
    def accept_the_first_events(self) -> None:
        for key in FIRST_KEYS:
            self.accept(key)

    @rule(key=st.sampled_from(KEYS))
    def accept(self, key: str) -> None:
        self.clock.advance(TICK)
        answer = self.inbox.Accept(accept_request(self.ns, key), timeout=10)
        event = self.model.events.get(key)
        if event is None:
            assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED, f"Accept({key}): {answer.outcome}"
            self.model.events[key] = ref.Event(due=self.clock.now)
        else:
            assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_DUPLICATE, f"Accept({key}) again: {answer.outcome}"
            assert answer.state == event.state, f"Accept({key}) again: state {answer.state}, model {event.state}"

    @rule(target=claims, worker=st.sampled_from(WORKERS))
    def claim_after_the_leases_ran_out(self, worker: str) -> ref.Claim | MultipleResults[ref.Claim]:
        """The takeover: every lease has expired (its worker stalled) and a worker claims."""
        self.clock.advance(LEASE.total_seconds() + 1)
        return self.claim(worker)

    @rule(target=claims, worker=st.sampled_from(WORKERS))
    def claim(self, worker: str) -> ref.Claim | MultipleResults[ref.Claim]:
        now = self.clock.advance(TICK)
        request = inbox_pb2.ClaimRequest(
            namespaces=[self.ns], max_events=1, lease=seconds(LEASE.total_seconds()), worker_id=worker
        )
        answer = self.inbox.Claim(request, timeout=10)
        candidates = self.model.due(now)
        what = f"Claim by {worker} at {now:%H:%M:%S}"
        if not answer.events:
            spent = [k for k in candidates if self.model.events[k].attempt >= self.model.max_attempts]
            assert not candidates or spent, f"{what}: nothing claimed, but {candidates} are due"
            if spent:
                # The one due event Claim looked at had no attempts left: dead-lettered, not lost.
                dead = [k for k in spent if self.stored(k).summary.state == ref.DEAD_LETTERED]
                assert len(dead) == 1, f"{what}: expected one of {spent} dead-lettered, found {dead}"
                self.model.dead_letter_at_claim(dead[0])
            return multiple()
        [event] = answer.events
        assert event.event_key in candidates, f"{what}: took {event.event_key}, the design says one of {candidates}"
        assert self.model.events[event.event_key].attempt < self.model.max_attempts, f"{what}: attempts spent"
        assert event.fencing_token > self.last_fencing, f"{what}: fencing token {event.fencing_token} did not grow"
        self.last_fencing = event.fencing_token
        claim = ref.Claim(worker, event.event_key, event.claim_token, event.fencing_token)
        self.model.claim(claim, now)
        expected = self.model.events[claim.key]
        assert event.attempt == expected.attempt, f"{what}: attempt {event.attempt}, the design says {expected.attempt}"
        assert when(event.lease_expires_at) == now + LEASE, f"{what}: lease ends {event.lease_expires_at}"
        self.check_actions(what, list(event.actions), expected)
        return claim

    @rule(claim=claims)
    def renew_lease(self, claim: ref.Claim) -> None:
        now = self.clock.advance(TICK)
        request = inbox_pb2.RenewLeaseRequest(**self.fence(claim), lease=seconds(LEASE.total_seconds()))
        what = f"RenewLease by {self.who(claim)}"
        code, answer = self.call(what, self.inbox.RenewLease, request)
        self.expect(what, code, self.model.renew(claim, now))
        if answer is not None:
            assert when(answer.lease_expires_at) == now + LEASE, f"{what}: lease ends {answer.lease_expires_at}"

    @rule(claim=claims)
    def complete(self, claim: ref.Claim) -> None:
        what = f"Complete by {self.who(claim)}"
        code, _ = self.call(what, self.inbox.Complete, inbox_pb2.CompleteRequest(**self.fence(claim)))
        self.expect(what, code, self.model.complete(claim))

    @rule(claim=claims, permanent=st.booleans(), retry_after=st.sampled_from([1, 45]))
    def fail(self, claim: ref.Claim, permanent: bool, retry_after: int) -> None:
        now = self.clock.advance(TICK)
        request = inbox_pb2.FailRequest(
            **self.fence(claim), error="boom", permanent=permanent, retry_after=seconds(retry_after)
        )
        what = f"Fail(permanent={permanent}) by {self.who(claim)}"
        code, answer = self.call(what, self.inbox.Fail, request)
        self.expect(
            what, code, self.model.fail(claim, permanent=permanent, retry_after=seconds_td(retry_after), now=now)
        )
        if answer is not None:
            event = self.model.events[claim.key]
            assert answer.state == event.state, f"{what}: state {answer.state}, the design says {event.state}"
            if event.state == ref.PENDING:
                assert when(answer.next_attempt_at) == event.due, f"{what}: next attempt {answer.next_attempt_at}"

    @rule(claim=claims)
    def release(self, claim: ref.Claim) -> None:
        what = f"Release by {self.who(claim)}"
        now = self.clock.advance(TICK)
        code, _ = self.call(what, self.inbox.Release, inbox_pb2.ReleaseRequest(**self.fence(claim)))
        self.expect(what, code, self.model.release(claim, now))

    @rule(by=st.sampled_from([1, 20, 31, 61]))
    def time_passes(self, by: int) -> None:
        """Leases expire and retries come due by moving the clock; only ever forward."""
        self.clock.advance(by)

    @invariant()
    def stored_events_agree(self) -> None:
        """What the server stored: state, attempt, one open claim (the current one), the ledger."""
        stored = self.read_back()
        assert sorted(stored) == sorted(self.model.events), f"stored events {sorted(stored)}"
        for key, expected in self.model.events.items():
            state, attempt, still_open, actions = stored[key]
            what = f"event {key} as stored"
            assert (state, attempt) == (expected.state, expected.attempt), (
                f"{what}: state {state}, attempt {attempt}; the design says {expected.state}, {expected.attempt}"
            )
            current = [expected.current.fencing] if expected.current is not None else []
            assert still_open == current, f"{what}: open claims {still_open}, the design says {current}"
            self.check_actions(what, actions, expected)

    def read_back(self) -> dict[str, tuple[int, int, list[int], list[types_pb2.ActionRecord]]]:
        """The namespace's rows, in one round trip on the test's own loop (cheaper than a GetEvent per event)."""

        async def work(conn: Any) -> list[Any]:
            cur = await conn.execute(READ_BACK, {"namespace": self.ns})
            rows: list[Any] = await cur.fetchall()
            return rows

        rows = asyncio.run_coroutine_threadsafe(self.db.run(work), self.loop).result(timeout=30)
        stored: dict[str, tuple[int, int, list[int], list[types_pb2.ActionRecord]]] = {}
        for key, state, attempt, still_open, action_state, fencing, idempotency_key in rows:
            actions = []
            if action_state is not None:
                actions.append(
                    types_pb2.ActionRecord(
                        state=ACTION_STATES[action_state], fencing_token=fencing, idempotency_key=idempotency_key
                    )
                )
            stored[key] = (EVENT_STATES[state], attempt, list(still_open), actions)
        return stored

    def check_actions(self, what: str, stored: list[types_pb2.ActionRecord], expected: ref.Event) -> None:
        action = expected.action
        if action is None:
            assert stored == [], f"{what}: actions {stored}, none recorded"
            return
        [record] = stored
        assert (record.state, record.fencing_token) == (action.state, action.fencing), (
            f"{what}: action {record.state} by fencing {record.fencing_token},"
            f" the design says {action.state} by {action.fencing}"
        )
        assert record.idempotency_key == action.idempotency_key, f"{what}: the idempotency key changed"

    def stored(self, key: str) -> admin_pb2.Event:
        answer = self.admin.GetEvent(admin_pb2.GetEventRequest(namespace=self.ns, event_key=key), timeout=10)
        event: admin_pb2.Event = answer.event
        return event

    def who(self, claim: ref.Claim) -> str:
        standing = "current" if self.model.events[claim.key].is_current(claim) else "not current"
        return f"{claim.worker} (its claim of {claim.key}, fencing {claim.fencing}, {standing})"


class ProtocolWithActions(ProtocolMachine):
    """The same, with RecordActionOutcome from current and superseded claims."""

    @rule(claim=ProtocolMachine.claims, state=st.sampled_from([ref.INTENDED, ref.SUCCEEDED, ref.FAILED, ref.UNKNOWN]))
    def record_action_outcome(self, claim: ref.Claim, state: int) -> None:
        request = inbox_pb2.RecordActionOutcomeRequest(**self.fence(claim), action=ACTION, state=state)  # type: ignore[arg-type]
        what = f"RecordActionOutcome({types_pb2.ActionState.Name(state)}) by {self.who(claim)}"
        code, answer = self.call(what, self.inbox.RecordActionOutcome, request)
        self.expect(what, code, self.model.record(claim, state))
        if answer is not None:
            action = self.model.events[claim.key].action
            assert action is not None
            if not action.idempotency_key:
                action.idempotency_key = answer.action.idempotency_key  # minted by the first record
            self.check_actions(what, [answer.action], self.model.events[claim.key])


def seconds_td(value: int) -> timedelta:
    return timedelta(seconds=value)


@dataclass(frozen=True)
class Target:
    """The running server, its clock, and the database behind it on the test's loop."""

    server: RunningServer
    clock: FakeClock
    db: Database
    loop: asyncio.AbstractEventLoop


async def run_machine(machine: type[ProtocolMachine], target: Target, options: settings) -> None:
    """Runs the machine in a thread with a blocking channel; the server keeps serving on this loop."""

    def run() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{target.server.port}") as channel:
            bound = type(
                machine.__name__,
                (machine,),
                {
                    "inbox": InboxServiceStub(channel),
                    "admin": InboxAdminServiceStub(channel),
                    "clock": target.clock,
                    "db": target.db,
                    "loop": target.loop,
                },
            )
            run_state_machine_as_test(bound, settings=options)

    await asyncio.to_thread(run)


@pytest.fixture
async def target(clocked_server: RunningServer, clock: FakeClock, db: Database) -> Target:
    return Target(clocked_server, clock, db, asyncio.get_running_loop())


async def test_random_protocol_sequences_answer_as_the_design_says(target: Target) -> None:
    await run_machine(ProtocolWithActions, target, SEQUENCES)


def _unfenced(query: str) -> str:
    """The same statement with its claim-token condition cut out of the WHERE clause."""
    cut = re.sub(r"\s+AND\s+(\w+\.)?claim_token\s*=\s*%\(claim_token\)s", "", query)
    assert cut != query, "the query has no claim_token condition to remove"
    return cut


async def test_an_unfenced_renewal_is_found_by_the_state_machine(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deliberately broken server: RenewLease no longer checks the claim token.
    monkeypatch.setitem(QUERIES, "event_renew_lease", _unfenced(QUERIES["event_renew_lease"]))
    hunt = settings(SEQUENCES, max_examples=100, phases=[Phase.generate])
    with pytest.raises(AssertionError, match=r"RenewLease by .*not current.*answered OK, the design says ABORTED"):
        await run_machine(ProtocolMachine, target, hunt)
