"""External actions with one idempotency key across every retry, and honest outcomes.

An action is one effect on the outside world (send an email, charge a card),
named within its event ("send-welcome:v1"). Its life, on the server's ledger:

    INTENDED -> SUCCEEDED | FAILED | UNKNOWN;  UNKNOWN -> SUCCEEDED | FAILED;  FAILED -> INTENDED

Before acting, this claim records INTENDED and gets the key to pass
downstream. The body's end decides the outcome: it returned (SUCCEEDED), it
raised an error that proves nothing happened (FAILED), or it was cut off where
the remote side may have acted: a timeout, a dropped connection, a
cancellation (UNKNOWN). A later claim skips a SUCCEEDED action, and settles an
UNKNOWN one through the user's reconcile hook before acting again. An action
left INTENDED by an earlier claim (its worker died mid-action) is just as
uncertain: it is recorded UNKNOWN and reconciled the same way.

With tracing on, each action is an `action` span (`worker_spans.ActionSpan`)
from its plan to its recorded outcome, current while the body runs.
"""

from __future__ import annotations

import asyncio
import enum
import http.client
import urllib.error
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

from inboxd_client import tracing
from inboxd_client.outcomes import ActionResult, ActionUnresolved, Reconciled, UncertainOutcome
from inboxd_client.v1 import inbox_pb2, types_pb2

if TYPE_CHECKING:
    from inboxd_client.fenced_calls import FencedCalls
    from inboxd_client.worker_spans import ActionSpan

INTENDED = types_pb2.ACTION_STATE_INTENDED
SUCCEEDED = types_pb2.ACTION_STATE_SUCCEEDED
FAILED = types_pb2.ACTION_STATE_FAILED
UNKNOWN = types_pb2.ACTION_STATE_UNKNOWN

# Errors after which the remote side may have acted. OSError covers TimeoutError
# (asyncio's too), ConnectionError, socket errors and urllib's URLError (but see
# HTTPError in is_uncertain); http.client's errors mostly mean a reply was cut
# off. Some of these happen before anything was sent, but calling them UNKNOWN
# costs only a lookup.
UNCERTAIN_ERRORS: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException, UncertainOutcome)
MAX_DETAIL_CHARS = 1000

AsyncReconcile = Callable[[str], Awaitable[Reconciled | None]]
SyncReconcile = Callable[[str], Reconciled | None]


def is_uncertain(exc: BaseException, extra: tuple[type[BaseException], ...] = ()) -> bool:
    """True when the body's end says nothing about whether the remote side acted."""
    if isinstance(exc, extra):
        return True
    if isinstance(exc, urllib.error.HTTPError):
        # An OSError by descent, but a real answer: a 4xx says the request was
        # refused; a 5xx may come from a gateway after the service acted.
        return exc.code >= 500
    # Not an Exception (a cancellation, an interpreter shutdown): the body was
    # cut off at a point nobody knows.
    return not isinstance(exc, Exception) or isinstance(exc, UNCERTAIN_ERRORS)


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_DETAIL_CHARS]


class Plan(enum.Enum):
    """What an action needs before its body may run."""

    ACT = "act"  # never tried, or tried and failed for sure: record INTENDED and act
    RECONCILE = "reconcile"  # may have happened: look it up first
    DONE = "done"  # succeeded on some claim: skip


class ActionLedger:
    """The event's actions as this claim knows them, and the calls that move them along."""

    def __init__(self, client: FencedCalls, event: inbox_pb2.ClaimedEvent) -> None:
        self._client = client
        self._event = event
        self._records: dict[str, types_pb2.ActionRecord] = {a.action: a for a in event.actions}

    @property
    def records(self) -> Mapping[str, types_pb2.ActionRecord]:
        return dict(self._records)

    @property
    def event(self) -> inbox_pb2.ClaimedEvent:
        return self._event

    def plan(self, name: str) -> Plan:
        record = self._records.get(name)
        if record is None or record.state == FAILED:
            return Plan.ACT
        if record.state == SUCCEEDED:
            return Plan.DONE
        # UNKNOWN, or INTENDED with no outcome after it: an earlier attempt
        # (of this claim or another) stopped somewhere around the call.
        return Plan.RECONCILE

    def already_done(self, name: str) -> Action:
        """The handle on an action some claim did: `done`, with the key and the ref its success was recorded with."""
        record = self._records[name]
        return Action(name, record.idempotency_key, done=True, external_ref=record.external_ref)

    async def record(
        self, name: str, state: types_pb2.ActionState, *, external_ref: str = "", detail: str = ""
    ) -> types_pb2.ActionRecord:
        answer = await self._client.record_action_outcome(
            self._event, name, state, external_ref=external_ref, detail=detail
        )
        self._records[name] = answer.action
        return answer.action

    async def prepare_reconcile(self, name: str) -> str:
        """Makes an abandoned INTENDED say what it is, UNKNOWN; answers the key to look up."""
        record = self._records[name]
        if record.state == INTENDED:
            record = await self.record(
                name,
                UNKNOWN,
                detail=f"INTENDED by the claim with fencing token {record.fencing_token}, which recorded no outcome",
            )
        return record.idempotency_key

    async def apply_verdict(self, name: str, verdict: Reconciled | None, *, asked: bool) -> bool:
        """Records what reconciliation found; True when the action is done and must not run again.

        asked: a reconcile hook was called (and `verdict` is its answer); False: there was none.
        """
        if verdict is None:
            raise ActionUnresolved(name, self._records[name].idempotency_key, asked=asked, answer=verdict)
        if verdict.succeeded:
            detail = verdict.detail or "reconciled: the effect happened"
            await self.record(name, SUCCEEDED, external_ref=verdict.external_ref, detail=detail)
            return True
        await self.record(name, FAILED, detail=verdict.detail or "reconciled: no effect downstream")
        return False

    async def intend(self, name: str) -> str:
        """Records INTENDED (needs the current claim) and answers the action's idempotency key."""
        return (await self.record(name, INTENDED)).idempotency_key

    async def settle(
        self, name: str, exc: BaseException | None, external_ref: str, uncertain: tuple[type[BaseException], ...]
    ) -> None:
        """Records how the body ended: returned, failed for sure, or cut off."""
        if exc is None:
            await self.record(name, SUCCEEDED, external_ref=external_ref)
        elif is_uncertain(exc, uncertain):
            await self.record(name, UNKNOWN, external_ref=external_ref, detail=describe(exc))
        else:
            await self.record(name, FAILED, detail=describe(exc))


class Action:
    """The body's handle on one action: its idempotency key, whether it is already done, the ref to record.

    Set `external_ref` to the downstream's id for the effect (a message id, say);
    it is stored with SUCCEEDED.
    """

    def __init__(self, name: str, idempotency_key: str, *, done: bool, external_ref: str = "") -> None:
        self.name = name
        self.external_ref = external_ref
        self._key = idempotency_key
        self._done = done
        self._checked = False

    @property
    def done(self) -> bool:
        """True when an earlier claim already did this action: skip the body."""
        self._checked = True
        return self._done

    @property
    def idempotency_key(self) -> str:
        """The key to pass downstream: the same on every claim and retry of this event's action."""
        if self._done and not self._checked:
            # The body is about to act on an action that already succeeded and
            # never looked at `done`: refuse, rather than do it twice.
            raise RuntimeError(f"action {self.name!r} already succeeded; check `act.done` before acting")
        return self._key

    def result(self) -> ActionResult:
        return ActionResult(self.name, self._key, self.external_ref, ran=not self._done)


def start_span(ledger: ActionLedger, name: str) -> ActionSpan | None:
    """The action's span when tracing is on; None (and nothing made) when off."""
    tracer = tracing.TRACER
    if tracer is None:
        return None
    from inboxd_client.worker_spans import ActionSpan  # OpenTelemetry is there: TRACER is set

    return ActionSpan(tracer, ledger.event, name)


def end_span(
    span: ActionSpan | None,
    action: Action | None,
    exc: BaseException | None,
    uncertain: tuple[type[BaseException], ...],
) -> None:
    """Ends the action's span with the outcome the ledger got: as `settle` judges the body's end."""
    if span is None:
        return
    if exc is None:
        span.end("SUCCEEDED", reused=action is not None and not action.result().ran)
    elif isinstance(exc, ActionUnresolved) or is_uncertain(exc, uncertain):
        span.end("UNKNOWN", error=exc)
    else:
        span.end("FAILED", error=exc)


class AsyncActionScope:
    """`async with ctx.action(name) as act`: records INTENDED on entry and the outcome on exit."""

    def __init__(
        self,
        ledger: ActionLedger,
        name: str,
        reconcile: AsyncReconcile | None,
        uncertain: tuple[type[BaseException], ...],
    ) -> None:
        self._ledger = ledger
        self._name = name
        self._reconcile = reconcile
        self._uncertain = uncertain
        self._action: Action | None = None
        self._span: ActionSpan | None = None

    async def __aenter__(self) -> Action:
        ledger, name = self._ledger, self._name
        self._span = start_span(ledger, name)
        try:
            plan = ledger.plan(name)
            if plan is Plan.RECONCILE:
                key = await ledger.prepare_reconcile(name)
                verdict = await self._reconcile(key) if self._reconcile is not None else None
                asked = self._reconcile is not None
                plan = Plan.DONE if await ledger.apply_verdict(name, verdict, asked=asked) else Plan.ACT
            if plan is Plan.DONE:
                self._action = ledger.already_done(name)
            else:
                self._action = Action(name, await ledger.intend(name), done=False)
        except BaseException as exc:
            end_span(self._span, None, exc, self._uncertain)
            raise
        if self._span is not None:
            self._span.keyed(self._action.result().idempotency_key)
        return self._action

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        action = self._action
        try:
            if action is None or not action.result().ran:
                return
            # Shielded: the body may have ended in a cancellation, and the outcome
            # (UNKNOWN then) must still reach the ledger.
            await asyncio.shield(self._ledger.settle(self._name, exc, action.external_ref, self._uncertain))
        finally:
            end_span(self._span, action, exc, self._uncertain)


async def run_action_async(scope: AsyncActionScope, fn: Callable[[str], Awaitable[str | None]]) -> ActionResult:
    async with scope as act:
        if not act.done:
            act.external_ref = await fn(act.idempotency_key) or ""
    return act.result()
