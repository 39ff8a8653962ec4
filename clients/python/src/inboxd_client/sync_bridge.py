"""Sync handlers: they run in threads of their own, and reach the worker's event loop through here.

The worker and its client live on one asyncio loop. A sync handler blocks, so
it runs in a daemon thread (a stuck handler must not keep the process alive
after shutdown released its event), and every ledger call it makes is handed
to the loop and waited for.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from inboxd_client.actions import Action, ActionLedger, Plan, SyncReconcile, end_span, start_span
from inboxd_client.outcomes import ActionResult

if TYPE_CHECKING:
    from inboxd_client.worker_spans import ActionSpan

T = TypeVar("T")

# How long a handler thread waits for one ledger call on the loop; the calls
# themselves have their own deadlines, so this only guards against a loop that stopped.
LOOP_CALL_TIMEOUT = 300.0


def call_in_loop(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Runs `coro` on `loop` from another thread and waits for its result."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(LOOP_CALL_TIMEOUT)


def run_in_daemon_thread(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], name: str) -> asyncio.Future[T]:
    """Starts `fn` in a daemon thread; the future settles when it returns or raises.

    Cancelling the future does not stop the thread (nothing can): it stops the
    waiting. A result that arrives after that is dropped. The thread runs in a
    copy of the caller's context, as `asyncio.to_thread` would: the worker's
    `process` span stays current in the handler, and in the ledger calls it
    hands back to the loop.
    """
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - handed to the waiting coroutine
            outcome: tuple[T | None, BaseException | None] = (None, exc)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and the like cannot be set on a future
            outcome = (None, RuntimeError(f"the handler thread ended with {exc!r}"))
        else:
            outcome = (result, None)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(target,), name=name, daemon=True).start()
    return future


class SyncActionScope:
    """`with ctx.action(name) as act` for sync handlers: the async scope's steps, run on the loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ledger: ActionLedger,
        name: str,
        reconcile: SyncReconcile | None,
        uncertain: tuple[type[BaseException], ...],
    ) -> None:
        self._loop = loop
        self._ledger = ledger
        self._name = name
        self._reconcile = reconcile
        self._uncertain = uncertain
        self._action: Action | None = None
        self._span: ActionSpan | None = None

    def __enter__(self) -> Action:
        loop, ledger, name = self._loop, self._ledger, self._name
        self._span = start_span(ledger, name)
        try:
            plan = ledger.plan(name)
            if plan is Plan.RECONCILE:
                key = call_in_loop(loop, ledger.prepare_reconcile(name))
                # The hook runs here, in the handler's thread, like the body would.
                verdict = self._reconcile(key) if self._reconcile is not None else None
                asked = self._reconcile is not None
                plan = Plan.DONE if call_in_loop(loop, ledger.apply_verdict(name, verdict, asked=asked)) else Plan.ACT
            if plan is Plan.DONE:
                self._action = ledger.already_done(name)
            else:
                self._action = Action(name, call_in_loop(loop, ledger.intend(name)), done=False)
        except BaseException as exc:
            end_span(self._span, None, exc, self._uncertain)
            raise
        if self._span is not None:
            self._span.keyed(self._action.result().idempotency_key)
        return self._action

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        action = self._action
        try:
            if action is None or not action.result().ran:
                return
            call_in_loop(self._loop, self._ledger.settle(self._name, exc, action.external_ref, self._uncertain))
        finally:
            end_span(self._span, action, exc, self._uncertain)


def run_action_sync(scope: SyncActionScope, fn: Callable[[str], str | None]) -> ActionResult:
    with scope as act:
        if not act.done:
            act.external_ref = fn(act.idempotency_key) or ""
    return act.result()
