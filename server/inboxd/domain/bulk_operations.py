"""Bulk operations' values and rules: a filter, an action, an operation's state and counts, its pace.

An operator replays, or ignores, every event a filter matches (DESIGN, Bulk
operations). The request is checked here, field by field; the store numbers
the matches when the operation starts, and a runner deals with them in
chunks. A chunk changes a match only if the event still matches the filter
and is in a state the action acts on; the others moved on since, and are
counted as skipped. Nothing here knows about gRPC or PostgreSQL.
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument, NotFound, TooManyRequests
from inboxd.domain.namespace_patterns import grant_to_like
from inboxd.domain.subscriptions import check_name
from inboxd.domain.vocabulary import EventState

MAX_RATE = 10_000.0
# The slowest pace a start may ask for: one event every ten seconds. Below it a
# rate says nothing an operator means (1e-300 made a pace wait of 1e300 s, and
# due times no timedelta can hold), and an operation that slow outlives anyone
# watching it.
MIN_RATE = 0.1
# Events per chunk, each chunk one transaction: long enough to cost little per event, short enough that
# the rows it locks are held for a few milliseconds and a cancel waits no longer than one chunk.
CHUNK_SIZE = 500
# Per chunk at most a quarter of a second's worth at the operation's rate, so the pace is smooth.
CHUNKS_PER_SECOND = 4
FIRST_MATCHES = 20
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_EVENT_TYPES = 100


class BulkAction(enum.StrEnum):
    """What an operation does to each event it matched; the SQL CHECK constraint lists the same values."""

    REPLAY = "replay"
    IGNORE = "ignore"
    # Insert a subscription's copy of each event, as its Accept would have (fan-out of the past).
    COPY = "copy"


class BulkState(enum.StrEnum):
    RUNNING = "running"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


# The states each action acts on, as the single acts do: Replay's and Discard's.
ACTABLE: dict[BulkAction, frozenset[EventState]] = {
    BulkAction.REPLAY: frozenset({EventState.COMPLETED, EventState.DEAD_LETTERED}),
    BulkAction.IGNORE: frozenset({EventState.PENDING, EventState.DEAD_LETTERED}),
    BulkAction.COPY: frozenset(EventState),
}
DEFAULT_STATES = (EventState.DEAD_LETTERED,)


@dataclass(frozen=True, slots=True)
class BulkFilter:
    """Which events an operation acts on: every field set must match."""

    namespace_pattern: str
    event_types: tuple[str, ...] = ()
    states: tuple[EventState, ...] = DEFAULT_STATES
    accepted_from: datetime | None = None
    accepted_until: datetime | None = None
    error_contains: str = ""
    ordering_key: str = ""

    @property
    def like_pattern(self) -> str:
        """The namespace pattern as SQL LIKE, as the tokens' grants are translated."""
        return grant_to_like(self.namespace_pattern)


@dataclass(frozen=True, slots=True)
class BulkRequest:
    """A StartBulkOperation: checked by `check_request` before anything is stored."""

    filter: BulkFilter
    action: BulkAction
    reason: str
    rate: float = 0.0
    dry_run: bool = False
    # COPY's subscription: its copies go to `<subscription>/<namespace>`. Empty for the other actions.
    subscription: str = ""


def check_request(request: BulkRequest) -> BulkRequest:
    """Raises InvalidArgument naming the first field that is wrong; answers the request as it stands."""
    f = request.filter
    validation.check_identity("filter.namespace_pattern", f.namespace_pattern)
    if len(f.event_types) > MAX_EVENT_TYPES:
        raise InvalidArgument("filter.event_types", f"has {len(f.event_types)} types; the limit is {MAX_EVENT_TYPES}")
    for i, event_type in enumerate(f.event_types):
        validation.check_identity(f"filter.event_types[{i}]", event_type)
    allowed = ACTABLE[request.action]
    for i, state in enumerate(f.states):
        if state not in allowed:
            names = " or ".join(sorted(s.name for s in allowed))
            raise InvalidArgument(
                f"filter.states[{i}]", f"is {state.name}: {request.action.name} acts on {names} events only"
            )
    if f.accepted_from is not None and f.accepted_until is not None and f.accepted_from >= f.accepted_until:
        raise InvalidArgument("filter.accepted_until", "must be later than filter.accepted_from")
    validation.check_text("filter.error_contains", f.error_contains, validation.MAX_TEXT_BYTES)
    validation.check_text("filter.ordering_key", f.ordering_key, validation.MAX_IDENTITY_BYTES)
    validation.required_reason(request.reason)
    if request.action is BulkAction.COPY:
        check_name("subscription", request.subscription)
    elif request.subscription:
        raise InvalidArgument("subscription", f"goes with COPY only, not {request.action.name}")
    if not math.isfinite(request.rate) or not (request.rate == 0 or MIN_RATE <= request.rate <= MAX_RATE):
        raise InvalidArgument(
            "rate", f"is {request.rate:g}; use 0 (no pace), or {MIN_RATE:g} up to {MAX_RATE:,.0f} events per second"
        )
    return request


def check_room(*, actor: str, mine: int, everyone: int, per_token: int, total: int) -> None:
    """Raises TooManyRequests when a new operation would pass a cap on those RUNNING (a dry run is never asked).

    `mine` counts the RUNNING operations the caller's token started, `everyone` all of them.
    """
    if mine >= per_token:
        raise TooManyRequests(
            f"token {actor!r} has {mine} bulk operations running, the most one token may run"
            f" (INBOXD_BULK_MAX_RUNNING_PER_TOKEN={per_token}): wait for one to end, or cancel one"
        )
    if everyone >= total:
        raise TooManyRequests(
            f"{everyone} bulk operations are running, the most this deployment runs at once"
            f" (INBOXD_BULK_MAX_RUNNING={total}): wait for one to end, or cancel one"
        )


def operation_id(text: str) -> uuid.UUID:
    """An operation's id from a request: required; one that names no operation is NotFound."""
    if not text:
        raise InvalidArgument("id", "is required")
    validation.check_text("id", text, validation.MAX_IDENTITY_BYTES)
    try:
        return uuid.UUID(text)
    except ValueError:
        raise NotFound(f"no bulk operation {text!r}") from None


@dataclass(frozen=True, slots=True)
class BulkOperation:
    """One operation as stored: what it does, where it stands, and who started and ended it."""

    id: uuid.UUID
    filter: BulkFilter
    action: BulkAction
    reason: str
    rate: float
    dry_run: bool
    state: BulkState
    matched: int
    done: int
    skipped: int
    actor: str
    started_at: datetime
    finished_at: datetime | None
    cancelled_by: str
    error: str
    # Seconds from its start until it ended, or until it was read.
    elapsed: timedelta
    # COPY's subscription; empty for the other actions.
    subscription: str = ""

    @property
    def measured_rate(self) -> float:
        """Events changed per second over its run so far."""
        seconds = self.elapsed.total_seconds()
        return self.done / seconds if seconds > 0 else 0.0

    @property
    def namespace_pattern(self) -> str:
        return self.filter.namespace_pattern


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """One event a chunk changed: whom to wake for it, and when it comes due (a replayed one, at its pace)."""

    namespace: str
    event_key: str
    event_type: str
    delay: timedelta
    ordering_key: str


@dataclass(frozen=True, slots=True)
class Chunk:
    """What one chunk dealt with: the matches it read, those it changed, and where it stopped."""

    read: int
    changed: int
    last_position: int
    events: tuple[ChunkEvent, ...] = ()

    @property
    def skipped(self) -> int:
        return self.read - self.changed


def paced(rate: float) -> float:
    """The rate an operation is run at: 0 (no pace), or at least MIN_RATE.

    An operation stored before the floor existed may carry a slower rate; it
    runs at the floor rather than overflow its due times.
    """
    return 0.0 if rate <= 0 else max(rate, MIN_RATE)


def chunk_size(rate: float, largest: int = CHUNK_SIZE) -> int:
    """Matches per chunk: `largest`, or at most a quarter second's worth at the rate (at least one)."""
    if rate <= 0:
        return largest
    return max(1, min(largest, int(paced(rate) / CHUNKS_PER_SECOND)))


def spacing(rate: float) -> timedelta:
    """How far apart a chunk's replayed events become claimable, so they come at the rate, not at once."""
    return timedelta(seconds=1 / paced(rate)) if rate > 0 else timedelta(0)


def pace_wait(rate: float, changed_since: int, seconds_since: float) -> float:
    """Seconds to wait before the next chunk so that the last one's `changed_since` events took changed/rate."""
    if rate <= 0:
        return 0.0
    return max(0.0, changed_since / paced(rate) - seconds_since)


@dataclass(frozen=True, slots=True)
class BulkPosition:
    """Where a listing page stopped: the last operation shown."""

    started_at: datetime
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class BulkPage:
    operations: tuple[BulkOperation, ...]
    next_position: BulkPosition | None


_TOKEN_VERSION = "b1."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def encode_bulk_page_token(position: BulkPosition) -> str:
    micros = (position.started_at - _EPOCH) // timedelta(microseconds=1)
    body = json.dumps([micros, str(position.id)], separators=(",", ":")).encode("utf-8")
    return _TOKEN_VERSION + base64.urlsafe_b64encode(body).decode("ascii").rstrip("=")


def decode_bulk_page_token(token: str) -> BulkPosition:
    """Raises InvalidArgument for anything encode_bulk_page_token did not make."""
    if not token.startswith(_TOKEN_VERSION):
        raise InvalidArgument("page_token", "is not a token from a previous ListBulkOperationsResponse")
    data = token[len(_TOKEN_VERSION) :]
    try:
        micros, text = json.loads(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("utf-8"))
        if not isinstance(micros, int) or not isinstance(text, str):
            raise ValueError("unexpected field types")
        return BulkPosition(_EPOCH + timedelta(microseconds=micros), uuid.UUID(text))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, OverflowError):
        raise InvalidArgument("page_token", "is damaged: pass next_page_token exactly as received") from None


def page_size(requested: int) -> int:
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    if not 1 <= requested <= MAX_PAGE_SIZE:
        raise InvalidArgument("page_size", f"is {requested}; use 1..{MAX_PAGE_SIZE} (0 means {DEFAULT_PAGE_SIZE})")
    return requested


def states_words(states: Sequence[EventState]) -> str:
    return ", ".join(s.name for s in states)
