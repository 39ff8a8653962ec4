"""Recording external actions in an event's ledger: the action's states and the statement of each transition.

Every statement named below stands in queries/actions.sql, and every statement
there is named below; tests/unit/test_state_diagrams.py holds the two to each
other, the states to ActionState and the arrows to what
inboxd.domain.action_states.plan_action_write lets through. A line reads
`FROM -> TO  statement  when`; (none) is before the action's first record.

    (none)    -> INTENDED   action_create  the first record of an action: its idempotency key minted
    (none)    -> SUCCEEDED  action_create  an outcome with no INTENDED before it
    (none)    -> FAILED     action_create  likewise
    (none)    -> UNKNOWN    action_create  likewise
    INTENDED  -> INTENDED   action_update  a later claim declares its intent again: same key, its fencing token
    INTENDED  -> SUCCEEDED  action_update  the outcome of the intended attempt
    INTENDED  -> FAILED     action_update  likewise
    INTENDED  -> UNKNOWN    action_update  likewise: nobody knows whether the effect happened
    UNKNOWN   -> SUCCEEDED  action_update  reconciled, by a worker or an operator (SettleAction)
    UNKNOWN   -> FAILED     action_update  likewise
    FAILED    -> INTENDED   action_update  a retry, same idempotency key
    FAILED    -> SUCCEEDED  action_update  an older claim's SUCCEEDED: it proves the effect, so it always stands

SUCCEEDED is final. INTENDED needs the current claim; an outcome is taken from
any claim ever issued for the event, but an older claim's outcome other than
SUCCEEDED never moves the action past a newer claim's record: it is kept in
the history only (action_read answers the action as it stands, as it does for
a repeat).

An operator's settlement (store/operator_actions.py) is such an outcome too,
a fact about the outside world: it writes action_update and
action_history_add for an UNKNOWN action, or an INTENDED one whose claim is
no longer current, under a fencing token of its own, newer than every claim
before it, so no older claim's late outcome moves it back.

Beside the transitions, statements that move no action: they lock, read or
record what the transition decided.

    action_claim_lookup             the event, and the claim its token names: an outcome's fence
    action_claim_lookup_for_intent  the same, the event row share-locked until the intent is written
    action_lock                     the action's row, locked while its transition is decided
    action_read                     the action as it stands: a repeat, or an older claim's outcome kept
    action_history_add              every record the action received, applied or not
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.action_states import ActionWrite, plan_action_write
from inboxd.domain.errors import ClaimSuperseded, NotFound
from inboxd.domain.operator_views import ActionHistoryEntry
from inboxd.domain.vocabulary import ActionRecord, ActionState, Fence, FencingToken
from inboxd.store.claims import action_record
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


@dataclass(frozen=True, slots=True)
class UnresolvedActions:
    namespace: str
    unknown: int
    stale_intended: int


async def record_action(
    conn: Connection,
    fence: Fence,
    action: str,
    state: ActionState,
    *,
    external_ref: str = "",
    detail: str = "",
    now: datetime | None = None,
) -> ActionRecord:
    """Records intent or an outcome; checks identity, then the token, then the state."""
    key = {"namespace": fence.namespace, "event_key": fence.event_key}
    # Intent is decided under the lock its write keeps (the event row, shared):
    # a takeover cannot commit in between. Outcomes need no currency.
    lookup = "action_claim_lookup_for_intent" if state is ActionState.INTENDED else "action_claim_lookup"
    cur = await conn.execute(QUERIES[lookup], {**key, "claim_token": fence.claim_token})
    claim = await cur.fetchone()
    if claim is None:
        raise NotFound.event(fence.namespace, fence.event_key)
    fencing_token, is_current = claim
    if fencing_token is None:
        raise ClaimSuperseded("claim superseded: this claim token was never issued for the event")
    if state is ActionState.INTENDED and not is_current:
        raise ClaimSuperseded("claim superseded: only the current claim may record INTENDED")

    params: dict[str, Any] = {
        **key,
        "action": action,
        "state": state.value,
        "external_ref": external_ref,
        "detail": detail,
        "fencing_token": fencing_token,
        "now": now,
    }
    for _ in range(2):
        cur = await conn.execute(QUERIES["action_lock"], params)
        row = await cur.fetchone()
        older = row is not None and fencing_token < row[1]
        plan = plan_action_write(ActionState(row[0]) if row else None, state, from_older_claim=older)
        if plan is ActionWrite.CREATE:
            cur = await conn.execute(QUERIES["action_create"], params)
            created = await cur.fetchone()
            if created is None:
                continue  # a concurrent first record won; transition from its state
            await _keep_in_history(conn, params, applied=True)
            return action_record(created)
        query = "action_update" if plan is ActionWrite.UPDATE else "action_read"
        cur = await conn.execute(QUERIES[query], params)
        written = await cur.fetchone()
        assert written is not None, "the locked action row vanished"
        await _keep_in_history(conn, params, applied=plan is ActionWrite.UPDATE)
        return action_record(written)
    raise AssertionError("unreachable: the second pass finds the row created by the first")


async def _keep_in_history(conn: Connection, params: dict[str, Any], *, applied: bool) -> None:
    await conn.execute(QUERIES["action_history_add"], {**params, "applied": applied})


async def action_history(conn: Connection, namespace: str, event_key: str) -> list[ActionHistoryEntry]:
    """Every record the event's actions received, oldest first, applied or not."""
    cur = await conn.execute(QUERIES["action_history_for_event"], {"namespace": namespace, "event_key": event_key})
    return [
        ActionHistoryEntry(
            action=action,
            state=ActionState(state),
            external_ref=external_ref,
            detail=detail,
            fencing_token=FencingToken(fencing_token),
            applied=applied,
            recorded_at=recorded_at,
        )
        for action, state, external_ref, detail, fencing_token, applied, recorded_at in await cur.fetchall()
    ]


async def list_unresolved_actions(
    conn: Connection, namespace: str, *, stale_after: timedelta, limit: int, now: datetime | None = None
) -> list[tuple[str, ActionRecord]]:
    """One namespace's unresolved actions, oldest first, each with its event's key."""
    cur = await conn.execute(
        QUERIES["action_list_unresolved"],
        {"namespace": namespace, "stale_after": stale_after, "limit": limit, "now": now},
    )
    return [(str(row[1]), action_record(row[2:])) for row in await cur.fetchall()]


async def unresolved_actions(
    conn: Connection, *, stale_after: timedelta, namespace: str | None = None, now: datetime | None = None
) -> list[UnresolvedActions]:
    cur = await conn.execute(
        QUERIES["action_unresolved_count"], {"namespace": namespace, "stale_after": stale_after, "now": now}
    )
    return [UnresolvedActions(str(ns), int(u), int(s)) for ns, u, s in await cur.fetchall()]
