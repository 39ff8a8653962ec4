"""Replay: an operator returns a finished event to PENDING, audited."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from inboxd.domain.errors import NotFound, TransitionNotAllowed
from inboxd.domain.vocabulary import EventState
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES

REPLAYABLE = frozenset({EventState.COMPLETED, EventState.DEAD_LETTERED})


@dataclass(frozen=True, slots=True)
class Replayed:
    state_before: EventState
    # Whom to wake: the event is claimable at once.
    event_type: str


async def replay_event(
    conn: Connection, namespace: str, event_key: str, *, actor: str, reason: str, now: datetime | None = None
) -> Replayed:
    """COMPLETED or DEAD_LETTERED -> PENDING with attempts reset, and its audit row.

    Raises NotFound for an unknown event and TransitionNotAllowed for one that
    is PENDING or PROCESSING (it is live already: replaying it would race its
    worker) or whose payload retention has dropped (nothing left to process).
    """
    key = {"namespace": namespace, "event_key": event_key}
    cur = await conn.execute(QUERIES["event_replay_lock"], key)
    row = await cur.fetchone()
    if row is None:
        raise NotFound.event(namespace, event_key)
    state, event_type, has_payload = EventState(row[0]), str(row[1]), bool(row[2])
    if state not in REPLAYABLE:
        raise TransitionNotAllowed(f"the event is {state.name}: only COMPLETED or DEAD_LETTERED events can be replayed")
    if not has_payload:
        raise TransitionNotAllowed(
            "payload retention has dropped this event's payload: there is nothing left to replay"
        )
    cur = await conn.execute(
        QUERIES["event_replay"],
        {**key, "actor": actor, "reason": reason, "state_before": state.value, "now": now},
    )
    if await cur.fetchone() is None:
        raise AssertionError("the locked, replayable event did not replay")
    return Replayed(state, event_type)
