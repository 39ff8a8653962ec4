"""What a handler gets for one claimed event: its fields, its fencing token, its actions, its cancellation.

`EventContext` is for async handlers, `SyncEventContext` for sync ones (which
run in a thread); they differ only in how `action` and `run_action` are called.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from inboxd_client.actions import ActionLedger, AsyncActionScope, AsyncReconcile, SyncReconcile, run_action_async
from inboxd_client.outcomes import ActionResult
from inboxd_client.payloads import DEFAULT_CONTENT_TYPE, parse_json
from inboxd_client.payloads import is_json as is_json_type
from inboxd_client.sync_bridge import SyncActionScope, run_action_sync
from inboxd_client.v1 import inbox_pb2, types_pb2

if TYPE_CHECKING:
    from inboxd_client.fenced_calls import FencedCalls


class _Claim:
    """The mutable state of one claim, shared by its async and sync views."""

    def __init__(self, client: FencedCalls, event: inbox_pb2.ClaimedEvent) -> None:
        self.event = event
        self.ledger = ActionLedger(client, event)
        self.cancelled = threading.Event()
        self.ignored_reason: str | None = None


class _EventView:
    """The claimed event's fields; shared by both contexts."""

    def __init__(self, claim: _Claim) -> None:
        self._claim = claim

    @property
    def event(self) -> inbox_pb2.ClaimedEvent:
        """The claimed event as the server sent it."""
        return self._claim.event

    @property
    def namespace(self) -> str:
        return self.event.namespace

    @property
    def event_key(self) -> str:
        return self.event.event_key

    @property
    def event_type(self) -> str:
        return self.event.event_type

    @property
    def payload(self) -> bytes:
        """The payload's bytes exactly as accepted, whatever its content type (what a signature is checked against)."""
        return self.event.payload

    @property
    def content_type(self) -> str:
        """The payload's media type as accepted, parameters kept (`application/json` from a server that sends none)."""
        return self.event.content_type or DEFAULT_CONTENT_TYPE

    @property
    def is_json(self) -> bool:
        """The content type is `application/json` or `+json`: `json()` parses the payload."""
        return is_json_type(self.content_type)

    def json(self) -> Any:
        """The payload parsed as JSON; raises NotJsonPayload (a PermanentError), naming the type, for any other type."""
        return parse_json(self.event.payload, self.content_type)

    @property
    def metadata(self) -> Mapping[str, str]:
        return dict(self.event.metadata)

    @property
    def attempt(self) -> int:
        """1 on the first claim; Release gives an attempt back."""
        return self.event.attempt

    @property
    def claim_token(self) -> str:
        return self.event.claim_token

    @property
    def fencing_token(self) -> int:
        """Strictly increasing across all claims: fence writes to your own store with it.

        A worker whose lease was taken over may still be running; give every
        write it makes a condition that only a newer claim can pass, so the
        stale worker's late write changes nothing::

            UPDATE accounts
               SET balance = balance + :amount, fence = :fencing_token
             WHERE id = :id AND fence < :fencing_token

        Zero rows updated means a newer claim (or this one, earlier) wrote
        first: stop. Keep one `fence` column per row you write (bigint, default 0).
        """
        return self.event.fencing_token

    @property
    def lease_expires_at(self) -> datetime:
        """The lease's end as claimed (renewals move it on the server)."""
        return self.event.lease_expires_at.ToDatetime(tzinfo=UTC)

    @property
    def last_error(self) -> str:
        """The previous failed attempt's error, if any."""
        return self.event.last_error

    @property
    def ordering_key(self) -> str:
        """The event's ordering key ("" for none): one event of a key is in flight at a time, by revision."""
        return self.event.ordering_key

    @property
    def revision(self) -> int:
        """The business revision the event carries (0: none)."""
        return self.event.revision

    @property
    def applied_revision(self) -> int:
        """The highest revision of the ordering key completed as APPLIED (0: none yet).

        Apply the event only if it is newer than what you hold::

            if ctx.stale:
                ctx.ignore(f"revision {ctx.revision} is at or below applied {ctx.applied_revision}")
                return

        By default the server completes stale events IGNORED itself and never
        hands them out; with INBOXD_STALE_REVISIONS=deliver they arrive here.
        """
        return self.event.applied_revision

    @property
    def stale(self) -> bool:
        """The event's revision is at or below its key's applied revision: older than the state applied."""
        return self.event.stale

    @property
    def actions(self) -> Mapping[str, types_pb2.ActionRecord]:
        """The event's action ledger as this claim knows it, by action name."""
        return self._claim.ledger.records

    @property
    def cancelled(self) -> threading.Event:
        """Set when the claim is lost (the lease was taken over) or shutdown is releasing the event.

        Async handlers are also cancelled outright; sync handlers should check
        `ctx.cancelled.is_set()` between steps and return early.
        """
        return self._claim.cancelled

    def ignore(self, reason: str) -> None:
        """Completes the event as IGNORED with `reason` once the handler returns (same as returning Ignore)."""
        if not reason:
            raise ValueError("ignore needs a reason")
        self._claim.ignored_reason = reason

    @property
    def ignored_reason(self) -> str | None:
        return self._claim.ignored_reason


class EventContext(_EventView):
    """An async handler's context. Build one yourself (`EventContext(client, event)`) to use actions outside Worker."""

    def __init__(self, client: FencedCalls, event: inbox_pb2.ClaimedEvent) -> None:
        super().__init__(_Claim(client, event))

    def action(
        self,
        name: str,
        *,
        reconcile: AsyncReconcile | None = None,
        uncertain: tuple[type[BaseException], ...] = (),
    ) -> AsyncActionScope:
        """`async with ctx.action(name) as act:` records INTENDED, then the outcome. Check `act.done` first::

            async with ctx.action("send-welcome:v1", reconcile=lookup) as act:
                if not act.done:
                    act.external_ref = await mailer.send(to, idempotency_key=act.idempotency_key)

        `run_action` does the same with no check to forget.
        """
        return AsyncActionScope(self._claim.ledger, name, reconcile, uncertain)

    async def run_action(
        self,
        name: str,
        fn: Callable[[str], Awaitable[str | None]],
        *,
        reconcile: AsyncReconcile | None = None,
        uncertain: tuple[type[BaseException], ...] = (),
    ) -> ActionResult:
        """Does `await fn(idempotency_key)` once per event, across every claim and retry.

        `fn` may return the downstream's id for the effect (stored as
        external_ref). If an earlier claim already succeeded, `fn` is not called.
        If the outcome is unknown (an earlier attempt timed out, lost its
        connection or died mid-call), `await reconcile(key)` looks it up first:
        `Reconciled(succeeded=True)` skips `fn`, `Reconciled(succeeded=False)`
        calls it again with the same key, None raises ActionUnresolved (retry later).
        Exceptions in `uncertain` (beyond OSError, timeouts, http.client errors,
        UncertainOutcome and cancellation) are recorded UNKNOWN; others FAILED.
        """
        return await run_action_async(self.action(name, reconcile=reconcile, uncertain=uncertain), fn)


class SyncEventContext(_EventView):
    """A sync handler's context: the same event and state, with blocking `action` and `run_action`."""

    def __init__(self, context: EventContext, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(context._claim)
        self._loop = loop

    def action(
        self,
        name: str,
        *,
        reconcile: SyncReconcile | None = None,
        uncertain: tuple[type[BaseException], ...] = (),
    ) -> SyncActionScope:
        """`with ctx.action(name) as act:` as in EventContext.action, with a sync reconcile hook."""
        return SyncActionScope(self._loop, self._claim.ledger, name, reconcile, uncertain)

    def run_action(
        self,
        name: str,
        fn: Callable[[str], str | None],
        *,
        reconcile: SyncReconcile | None = None,
        uncertain: tuple[type[BaseException], ...] = (),
    ) -> ActionResult:
        """`fn(idempotency_key)` once per event; see EventContext.run_action."""
        return run_action_sync(self.action(name, reconcile=reconcile, uncertain=uncertain), fn)
