"""An operator's acts beyond Replay, one function each: settle an action, end a claim now, discard an event.

Each locks what it judges, lets `inboxd.domain.operator_actions` judge it
against what the operator saw, and writes the transition fenced by the same
facts in its WHERE clause, with its audit row, in the caller's transaction.
The order of checks is the design's: the event's identity (NotFound), then
whether it still stands as the operator saw it (TransitionNotAllowed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inboxd.domain.errors import NotFound
from inboxd.domain.operator_actions import (
    ClaimEnding,
    Discarding,
    EventAsSeen,
    OperatorActionKind,
    OperatorActionRecord,
    Settlement,
    attempt_after_ending,
    judge_claim_ending,
    judge_discarding,
    judge_settlement,
    no_such_action,
    word_action,
    word_event,
)
from inboxd.domain.vocabulary import ActionRecord, ActionState, EventState, FencingToken
from inboxd.store.claims import action_record
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


@dataclass(frozen=True, slots=True)
class Acted:
    """What an operator's act changed, for whom to wake: the event's type and ordering key."""

    event_type: str
    ordering_key: str


async def _event_as_seen(conn: Connection, query: str, namespace: str, event_key: str) -> tuple[EventAsSeen, Acted]:
    cur = await conn.execute(QUERIES[query], {"namespace": namespace, "event_key": event_key})
    row = await cur.fetchone()
    if row is None:
        raise NotFound.event(namespace, event_key)
    state, fencing_token, attempt, worker_id, event_type, ordering_key = row
    seen = EventAsSeen(
        EventState(state), FencingToken(fencing_token) if fencing_token is not None else None, attempt, worker_id
    )
    return seen, Acted(str(event_type), str(ordering_key))


async def settle_action(
    conn: Connection, settlement: Settlement, *, actor: str, now: datetime | None = None
) -> ActionRecord:
    """UNKNOWN, or INTENDED by a claim no longer current -> the operator's SUCCEEDED or FAILED, audited.

    The settlement is written as a claim's outcome is (action_update, its
    history entry), under a fencing token of its own, newer than every claim
    so far: an older claim's late outcome then never moves it back.
    """
    s = settlement
    event, _ = await _event_as_seen(conn, "event_operator_settle_lookup", s.namespace, s.event_key)
    key: dict[str, Any] = {"namespace": s.namespace, "event_key": s.event_key, "action": s.action, "now": now}
    cur = await conn.execute(QUERIES["action_lock"], key)
    row = await cur.fetchone()
    if row is None:
        raise no_such_action(s.namespace, s.event_key, s.action)
    state, fencing_token = ActionState(row[0]), FencingToken(row[1])
    judge_settlement(s, event, state, fencing_token)
    ref = await (await conn.execute(QUERIES["action_read"], key)).fetchone()
    assert ref is not None, "the locked action row vanished"
    before = word_action(state, fencing_token, str(ref[3]))
    minted = await (await conn.execute(QUERIES["fencing_token_mint"])).fetchone()
    assert minted is not None
    params = {
        **key,
        "state": s.outcome.value,
        "external_ref": s.external_ref,
        "detail": s.detail or f"settled by {actor}: {s.reason}",
        "fencing_token": int(minted[0]),
    }
    written = await (await conn.execute(QUERIES["action_update"], params)).fetchone()
    assert written is not None, "the locked action row vanished"
    record = action_record(written)
    await conn.execute(QUERIES["action_history_add"], {**params, "applied": True})
    after = word_action(record.state, record.fencing_token, record.external_ref)
    await conn.execute(
        QUERIES["operator_action_audit"], {**key, "actor": actor, "reason": s.reason, "before": before, "after": after}
    )
    return record


async def end_claim(conn: Connection, ending: ClaimEnding, *, actor: str, now: datetime | None = None) -> Acted:
    """PROCESSING under the claim the operator saw -> PENDING now, that claim's token dead, audited."""
    event, acted = await _event_as_seen(conn, "event_operator_lock", ending.namespace, ending.event_key)
    judge_claim_ending(ending, event)
    attempt_after = attempt_after_ending(ending, event.attempt)
    given = "counted" if ending.count_attempt else "given back"
    cur = await conn.execute(
        QUERIES["event_end_claim"],
        {
            "namespace": ending.namespace,
            "event_key": ending.event_key,
            "fencing_token": ending.expected_fencing_token,
            "attempt_after": attempt_after,
            "last_error": f"claim {ending.expected_fencing_token} ended by operator {actor}: {ending.reason}",
            "actor": actor,
            "reason": ending.reason,
            "before": word_event(event),
            "after": f"PENDING, attempt {attempt_after} (the ended claim's attempt {given})",
            "now": now,
        },
    )
    if await cur.fetchone() is None:
        raise AssertionError("the locked event, judged PROCESSING under that claim, did not end its claim")
    return acted


async def discard_event(conn: Connection, discarding: Discarding, *, actor: str, now: datetime | None = None) -> Acted:
    """PENDING or DEAD_LETTERED, as the operator saw it -> COMPLETED as IGNORED with the reason, audited."""
    d = discarding
    event, acted = await _event_as_seen(conn, "event_operator_lock", d.namespace, d.event_key)
    judge_discarding(d, event)
    cur = await conn.execute(
        QUERIES["event_discard"],
        {
            "namespace": d.namespace,
            "event_key": d.event_key,
            "expected_state": d.expected_state.value,
            "actor": actor,
            "reason": d.reason,
            "before": word_event(event),
            "after": "COMPLETED, IGNORED",
            "now": now,
        },
    )
    if await cur.fetchone() is None:
        raise AssertionError("the locked event, judged discardable, was not discarded")
    return acted


async def operator_actions(conn: Connection, namespace: str, event_key: str) -> tuple[OperatorActionRecord, ...]:
    """The operators' audited acts on one key, oldest first."""
    cur = await conn.execute(QUERIES["operator_actions_for_event"], {"namespace": namespace, "event_key": event_key})
    return tuple(
        OperatorActionRecord(OperatorActionKind(kind), actor, reason, acted_at, subject, before, after)
        for kind, actor, reason, acted_at, subject, before, after in await cur.fetchall()
    )
