"""The event page's acting forms: settle an unresolved action, end the claim, discard the event.

Each carries, hidden, what the page showed when the operator decided (the
action's state and fencing token, the live claim's fencing token, the event's
state), so the server refuses an act decided on a page that has gone stale;
and each carries the session's CSRF token, as Replay's form does. The POSTs
are handled in operator_forms.py.
"""

from __future__ import annotations

from inboxd.console.html import csrf_input, h
from inboxd.console.pages import event_ref
from inboxd.domain.operator_actions import DISCARDABLE
from inboxd.domain.operator_views import EventRecord
from inboxd.domain.vocabulary import ActionRecord, ActionState, EventState, FencingToken


def live_claim(record: EventRecord) -> FencingToken | None:
    """The fencing token of the claim holding a PROCESSING event (the claims ledger's live entry)."""
    if record.summary.state is not EventState.PROCESSING:
        return None
    live = [c.fencing_token for c in record.claims if c.ended_at is None]
    return live[-1] if live else None


def settleable(record: EventRecord, action: ActionRecord) -> bool:
    """UNKNOWN, or INTENDED by a claim that no longer holds the event: the operator's to settle."""
    if action.state is ActionState.UNKNOWN:
        return True
    return action.state is ActionState.INTENDED and live_claim(record) != action.fencing_token


def _hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name="{h(name)}" value="{h(value)}">'


def settle_form(record: EventRecord, action: ActionRecord, csrf: str, index: int) -> str:
    """The settle form of one unresolved action's row; '-' for an action that is not the operator's to settle."""
    if not settleable(record, action):
        return "-"
    s, field = record.summary, f"settle-{index}"
    return (
        f'<form method="post" action="/settle" class="inline-form">{csrf_input(csrf)}'
        + _hidden("event", event_ref(s.namespace, s.event_key))
        + _hidden("action", action.action)
        + _hidden("expected_state", action.state.value)
        + _hidden("expected_fencing_token", action.fencing_token)
        + f'<label for="{field}-outcome">Outcome of {h(action.action)} you found downstream</label>'
        f'<select id="{field}-outcome" name="outcome"><option value="succeeded">SUCCEEDED</option>'
        '<option value="failed">FAILED</option></select>'
        f'<label for="{field}-ref">External reference of {h(action.action)}</label>'
        f'<input id="{field}-ref" name="external_ref" maxlength="4096">'
        f'<label for="{field}-why">What you found, and where, for {h(action.action)} (kept in the audit trail)</label>'
        f'<input id="{field}-why" name="reason" required maxlength="4096">'
        f'<button type="submit">Settle {h(action.action)}</button></form>'
    )


def act_forms(record: EventRecord, csrf: str) -> str:
    """End the claim of a PROCESSING event; discard a PENDING or DEAD_LETTERED one; nothing otherwise."""
    s = record.summary
    ref = _hidden("event", event_ref(s.namespace, s.event_key))
    token = live_claim(record)
    if token is not None:
        return (
            '<section aria-labelledby="end-claim"><h2 id="end-claim">End the claim</h2>'
            f'<form method="post" action="/end-claim" class="card">{csrf_input(csrf)}{ref}'
            + _hidden("expected_fencing_token", token)
            + f"<p>Claim {token} holds this event. If its worker is gone, end the claim: the event is PENDING"
            " at once, and a late write with the claim's token is refused.</p>"
            '<label><input type="checkbox" name="count_attempt" value="1"> Count the ended claim as an'
            " attempt</label>"
            '<label for="end-claim-why">Why end it (kept in the audit trail and the last error)</label>'
            '<input id="end-claim-why" name="reason" required maxlength="4096">'
            '<button type="submit">End this claim</button></form></section>'
        )
    if s.state in DISCARDABLE:
        return (
            '<section aria-labelledby="discard"><h2 id="discard">Discard</h2>'
            f'<form method="post" action="/discard" class="card">{csrf_input(csrf)}{ref}'
            + _hidden("expected_state", s.state.value)
            + "<p>Complete it as IGNORED: it never runs; the event and its history stay.</p>"
            '<label for="discard-why">Why it should never run (kept as its IGNORED disposition)</label>'
            '<input id="discard-why" name="reason" required maxlength="4096">'
            '<button type="submit">Discard this event</button></form></section>'
        )
    return ""
