"""Domain errors. `api/status.py` maps each to one gRPC status code."""

from __future__ import annotations


class InboxError(Exception):
    """Base of every error inboxd answers deliberately."""


class InvalidArgument(InboxError):
    """The caller sent something inboxd cannot take. Nothing was stored."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class RefusedEvent(InvalidArgument):
    """PostgreSQL refused a value of one event of a group; `index` is its position (None: not found out)."""

    def __init__(self, index: int | None, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.index = index


class NotFound(InboxError):
    """No event has that (namespace, event_key)."""

    @classmethod
    def event(cls, namespace: str, event_key: str) -> NotFound:
        """The one wording of a missing event, wherever it is found missing."""
        return cls(f"no event {event_key!r} in namespace {namespace!r}")


class AlreadyExists(InboxError):
    """A name is taken by something else (a subscription created again with another definition)."""


class ClaimSuperseded(InboxError):
    """The claim token is not the event's current one: its lease was taken over."""


class TransitionNotAllowed(InboxError):
    """The event's state does not allow this transition."""


class Unauthenticated(InboxError):
    """No bearer token, or one that no tokens-file entry knows."""


class PermissionDenied(InboxError):
    """The caller's token lacks the scope or the namespace this call needs."""


class TooManyRequests(InboxError):
    """The caller holds too many of a bounded resource (waiting Claims, say)."""


class Unavailable(InboxError):
    """The database cannot be reached; nothing was acknowledged."""


class DatabaseFault(InboxError):
    """The database failed a statement through no fault of the caller (a bug, a trigger, corruption)."""
