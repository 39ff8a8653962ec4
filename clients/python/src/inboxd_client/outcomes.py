"""What a handler says about its event, and what an action's reconciliation says about the outside world.

A handler returns None (applied), returns `Ignore(reason)` (completed as
IGNORED), or raises: `PermanentError` dead-letters at once, `RetryLater`
retries after the delay it names, anything else retries with the server's
backoff until attempts run out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Ignore:
    """A handler's answer: complete the event as IGNORED, deliberately not acted upon, for this reason."""

    reason: str

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("Ignore needs a reason: the server refuses IGNORED without one")


class PermanentError(Exception):
    """Raised by a handler when retrying cannot help (a malformed payload, say): dead-letter the event now."""


class RetryLater(Exception):
    """Raised by a handler to retry after `retry_after` instead of the server's backoff (a rate limit, say)."""

    def __init__(self, message: str, retry_after: timedelta | float) -> None:
        super().__init__(message)
        self.retry_after = retry_after if isinstance(retry_after, timedelta) else timedelta(seconds=retry_after)


class HandlerTimeout(Exception):
    """The handler ran longer than the worker's `handler_timeout`: it was cancelled and its event Failed."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the handler ran longer than handler_timeout={seconds:g} s and was cancelled")
        self.seconds = seconds


class UncertainOutcome(Exception):
    """Raise it (or subclass it) inside an action when the remote side may have acted: it is recorded UNKNOWN.

    For example, an HTTP 502 from a gateway: the request may have reached the service behind it.
    """


class ActionUnresolved(Exception):
    """An action's outcome is UNKNOWN and nothing settled it; acting again could do the work twice.

    Raised by `run_action`/`action` when there is no reconcile hook (`asked`
    False) or the hook cannot tell yet (`asked` True: it answered None). The
    message says which: "pass reconcile=" only when none was given. The event is
    retried later, so a later reconciliation can settle it; an operator sees it
    in `Stats.unresolved_actions` and can settle it (`inboxd settle`).
    """

    def __init__(self, action: str, idempotency_key: str, *, asked: bool = False, answer: object = None) -> None:
        head = f"action {action!r} (idempotency key {idempotency_key}) may have happened"
        if asked:
            why = f"its reconcile could not tell (it answered {answer!r}): the event is retried later"
        else:
            why = "nothing settled it: pass reconcile= to look its outcome up before acting again"
        super().__init__(f"{head}, and {why}; an operator who knows can settle it (inboxd settle)")
        self.action = action
        self.idempotency_key = idempotency_key
        self.asked = asked


@dataclass(frozen=True)
class Reconciled:
    """A reconcile hook's verdict on an action whose outcome was unknown, looked up downstream by its key.

    `succeeded=True`: the effect happened (give its `external_ref` if you
    know it); the action is recorded SUCCEEDED and not done again.
    `succeeded=False`: it did not happen; the action is recorded FAILED and done again, with the same key.
    """

    succeeded: bool
    external_ref: str = ""
    detail: str = ""


@dataclass(frozen=True)
class ActionResult:
    """How an action ended for this claim: `ran` is False when an earlier claim had already done it."""

    action: str
    idempotency_key: str
    external_ref: str
    ran: bool
