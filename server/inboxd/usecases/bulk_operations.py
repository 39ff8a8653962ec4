"""Bulk operations for operators: start, read, list and cancel one, and run its next chunk (DESIGN, Bulk operations).

A base of `usecases.admin.Operators`, as `FlowControls` is. Each call is the
caller's within its grants: the filter's namespace pattern must lie within
the token's namespaces, and a listing or a read shows only the operations
that do. The runner (background/bulk_runner.py) calls `run_bulk_chunk`
until the operation ends; after each chunk commits, the Claims that may take
its events are woken: a replayed event when it comes due at the operation's
pace, and, an ignored keyed event having freed its key, the key's next.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from inboxd.config.tokens import Caller
from inboxd.domain.bulk_operations import (
    BulkAction,
    BulkOperation,
    BulkPage,
    BulkPosition,
    BulkRequest,
    Chunk,
    check_request,
    check_room,
    operation_id,
)
from inboxd.domain.errors import NotFound, PermissionDenied
from inboxd.domain.namespace_patterns import glob_within_any
from inboxd.domain.operator_views import EventSummary
from inboxd.domain.subscriptions import copy_namespace
from inboxd.domain.validation import required_reason
from inboxd.store import bulk_operations as store
from inboxd.store import subscriptions
from inboxd.store.database import Connection

if TYPE_CHECKING:
    from inboxd.usecases.inbox import Inbox


@dataclass(frozen=True, slots=True)
class BulkStarted:
    operation: BulkOperation
    first_matches: tuple[EventSummary, ...]


def _require_within_grants(caller: Caller, pattern: str) -> None:
    if not glob_within_any(pattern, caller.namespaces):
        raise PermissionDenied(
            f"token {caller.name!r} is not granted filter.namespace_pattern {pattern!r}: a bulk operation must lie"
            f" within the token's namespaces ({', '.join(caller.namespaces) or 'none'})"
        )


def _not_found(text: str) -> NotFound:
    return NotFound(f"no bulk operation {text!r}")


class BulkOperations:
    """StartBulkOperation, GetBulkOperation, ListBulkOperations, CancelBulkOperation, and the runner's chunks."""

    inbox: Inbox
    # Set by the runner of this process: told when an operation starts here, so it need not wait for its poll.
    bulk_started: asyncio.Event | None = None
    # Set by the runner of this process: told when an operation is cancelled here, so its pace sleep ends now.
    bulk_cancelled: Callable[[uuid.UUID], None] | None = None

    async def start_bulk_operation(self, request: BulkRequest, *, caller: Caller) -> BulkStarted:
        """Stores the operation with its matches counted now; a dry run ends there, changing nothing.

        A start that would pass a cap on RUNNING operations (the token's, or
        the deployment's) is TooManyRequests, and stores nothing.
        """
        check_request(request)
        _require_within_grants(caller, request.filter.namespace_pattern)
        if request.action is BulkAction.COPY:
            # The copies go to `<subscription>/...`: the caller must be granted that, and the subscription exist.
            await self._require_subscription(request.subscription, caller)
        now, op = self.inbox.clock(), uuid.uuid4()
        settings = self.inbox.settings

        async def start(conn: Connection) -> tuple[BulkOperation, list[EventSummary]]:
            if not request.dry_run:
                mine, everyone = await store.running_counts(conn, caller.name)
                check_room(
                    actor=caller.name,
                    mine=mine,
                    everyone=everyone,
                    per_token=settings.bulk_max_running_per_token,
                    total=settings.bulk_max_running,
                )
            return await store.start_operation(conn, request, operation=op, actor=caller.name, now=now)

        # Planned for its parameters: a plain namespace is an index range, a pattern a scan.
        operation, first = await self.inbox.db.run(start, custom_plans=True)
        if not request.dry_run and self.bulk_started is not None:
            self.bulk_started.set()
        return BulkStarted(operation, tuple(first))

    async def _require_subscription(self, name: str, caller: Caller) -> None:
        copies = copy_namespace(name, "*")
        if not glob_within_any(copies, caller.namespaces):
            raise PermissionDenied(
                f"token {caller.name!r} is not granted {copies!r}, where subscription {name!r}'s copies go"
                f" ({', '.join(caller.namespaces) or 'none'})"
            )
        if await self.inbox.db.run(lambda conn: subscriptions.find(conn, name)) is None:
            raise NotFound(f"no subscription {name!r}")

    async def get_bulk_operation(self, text: str, *, caller: Caller) -> BulkOperation:
        op = operation_id(text)
        now = self.inbox.clock()
        found = await self.inbox.db.run(lambda conn: store.read_operation(conn, op, now))
        # One the caller may not see is as unknown to them as one that does not exist.
        if found is None or not glob_within_any(found.namespace_pattern, caller.namespaces):
            raise _not_found(text)
        return found

    async def list_bulk_operations(self, *, after: BulkPosition | None, page_size: int, caller: Caller) -> BulkPage:
        """Operations within the caller's grants, newest first, one page after `after`."""
        now = self.inbox.clock()

        async def read(conn: Connection) -> BulkPage:
            shown: list[BulkOperation] = []
            position = after
            # Those outside the grants are passed over; a page reads on until it is full or none is left.
            while True:
                rows = await store.list_operations(conn, after=position, limit=page_size + 1, now=now)
                for op in rows:
                    if glob_within_any(op.namespace_pattern, caller.namespaces):
                        if len(shown) == page_size:
                            last = shown[-1]
                            return BulkPage(tuple(shown), BulkPosition(last.started_at, last.id))
                        shown.append(op)
                if len(rows) <= page_size:
                    return BulkPage(tuple(shown), None)
                position = BulkPosition(rows[-1].started_at, rows[-1].id)

        return await self.inbox.db.run(read)

    async def cancel_bulk_operation(self, text: str, *, reason: str, caller: Caller) -> BulkOperation:
        """Stops a RUNNING operation between two chunks (its counts then exact); an ended one as it stands."""
        op = operation_id(text)
        required_reason(reason)
        await self.get_bulk_operation(text, caller=caller)
        now = self.inbox.clock()
        found = await self.inbox.db.run(
            lambda conn: store.cancel_operation(conn, op, actor=caller.name, reason=reason, now=now)
        )
        if found is None:
            raise _not_found(text)
        if self.bulk_cancelled is not None:
            self.bulk_cancelled(op)
        return found

    async def ended_bulk_operations(self, ops: list[uuid.UUID]) -> list[uuid.UUID]:
        """Those of `ops` no longer RUNNING (cancelled on another replica, say)."""
        return await self.inbox.db.run(lambda conn: store.ended_operations(conn, ops), transaction=False)

    async def running_bulk_operations(self) -> list[uuid.UUID]:
        return await self.inbox.db.run(store.running_operations)

    async def run_bulk_chunk(self, op: uuid.UUID, *, largest: int) -> tuple[BulkOperation, Chunk | None]:
        """One chunk of the operation in one transaction; once committed, wakes whom its events concern.

        The Chunk is None when the operation had ended, or had no match left (it is DONE now).
        """
        now = self.inbox.clock()
        operation, chunk = await self.inbox.db.run(lambda conn: store.run_chunk(conn, op, largest=largest, now=now))
        if chunk is not None and chunk.events:
            self._wake_for(operation, chunk)
        return operation, chunk

    async def fail_bulk_operation(self, op: uuid.UUID, error: str) -> None:
        now = self.inbox.clock()
        await self.inbox.db.run(lambda conn: store.fail_operation(conn, op, error, now))

    def _wake_for(self, operation: BulkOperation, chunk: Chunk) -> None:
        if operation.action in (BulkAction.REPLAY, BulkAction.COPY):
            due_now: Counter[tuple[str, str]] = Counter()
            for event in chunk.events:
                if event.delay.total_seconds() <= 0:
                    due_now[event.namespace, event.event_type] += 1
                else:
                    # At its turn in the operation's pace, as a delayed Accept's event is woken for.
                    self.inbox.wake_when_due(event.delay, event.namespace, event.event_type)
            if due_now:
                self.inbox.wake_claimers(due_now)
            return
        # An ignored keyed event no longer holds its key back: the key's next event may be claimable now.
        freed = [(e.namespace, e.event_key) for e in chunk.events if e.ordering_key]
        if freed:
            self.inbox.wake_next_of_keys(freed)
