"""The console's page for one event: record, ledgers, conflicting copies, replays, and the acts on it.

The acts are Replay's form (here) and those of act_forms.py: settle an
unresolved action (in its row of the action ledger), end the claim, discard.

The payload (and each conflicting copy's) is sent only when the operator
asks for it: the page without `payload=1` does not contain it at all. Then
each is laid out by its content type (payload_html.py), as `inboxd show` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from inboxd.console.act_forms import act_forms, settle_form
from inboxd.console.deliveries_html import deliveries_table
from inboxd.console.html import csrf_input, event_url, h, page, state_badge, table, url, when
from inboxd.console.pages import event_ref
from inboxd.console.payload_html import content_type_code, payload_html
from inboxd.domain.conflict_copies import KEPT_CONFLICT_COPIES
from inboxd.domain.operator_views import ConflictingCopy, EventRecord
from inboxd.domain.vocabulary import EventState

REPLAYABLE = (EventState.COMPLETED, EventState.DEAD_LETTERED)


@dataclass(frozen=True)
class Notice:
    """What an act on the page did, or why it was refused, shown above the event as it now stands."""

    text: str
    refused: bool


def _waits_behind(record: EventRecord) -> list[tuple[str, str]]:
    """A PENDING event held back by its ordering key says so, and links to the event it waits for."""
    if record.blocked_by is None:
        return []
    link = h(event_url(record.summary.namespace, record.blocked_by))
    return [("Waits behind", f'<a href="{link}" id="blocked-by">{h(record.blocked_by)}</a> (its ordering key)')]


def _facts(record: EventRecord) -> str:
    s = record.summary
    facts = [
        ("Namespace", h(s.namespace)),
        ("Key", h(s.event_key)),
        ("Type", h(s.event_type)),
        ("State", state_badge(s.state)),
        ("Attempt", str(s.attempt)),
        ("Accepted", when(s.accepted_at)),
        ("Available", when(s.available_at)),
        ("Updated", when(s.updated_at)),
        ("Lease expires", when(record.lease_expires_at)),
        ("Completed", when(record.completed_at)),
        ("Disposition", h(record.disposition.value if record.disposition else "-")),
        ("Disposition reason", h(record.disposition_reason or "-")),
        ("Message id", h(record.message_id or "-")),
        ("Ordering key", h(record.ordering_key or "-")),
        *_waits_behind(record),
        ("Revision", str(record.revision)),
        ("Content type", content_type_code(record.content_type)),
        ("Last error", f'<span class="error-text">{h(s.last_error or "-")}</span>'),
    ]
    items = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in facts)
    return f'<section aria-labelledby="record"><h2 id="record">Record</h2><dl class="facts">{items}</dl></section>'


def _payload_section(record: EventRecord, show: bool) -> str:
    s = record.summary
    if show:
        hide = h(event_url(s.namespace, s.event_key))
        content = payload_html(record.payload, record.content_type) + f'<p><a href="{hide}">Hide payload</a></p>'
    else:
        link = h(url("/event", {"namespace": s.namespace, "key": s.event_key, "payload": "1"}) + "#payload")
        content = f'<p><a class="button" href="{link}" id="show-payload">Show payload</a></p>'
    return f'<section aria-labelledby="payload"><h2 id="payload">Payload</h2>{content}</section>'


def _ledgers(record: EventRecord, show_payload: bool, csrf: str) -> str:
    metadata = table(
        "Metadata", ("Name", "Value"), ([h(k), h(v)] for k, v in sorted(record.metadata.items())), empty="None."
    )
    claims = table(
        "Claims ledger, oldest first",
        ("Fencing token", "Worker", "Attempt", "Claimed", "Ended", "How it ended"),
        (
            [
                str(c.fencing_token),
                h(c.worker_id or "-"),
                str(c.attempt),
                when(c.claimed_at),
                when(c.ended_at),
                h(c.outcome or "live"),
            ]
            for c in record.claims
        ),
        empty="Never claimed.",
    )
    actions = table(
        "Action ledger",
        ("Action", "State", "Idempotency key", "External reference", "Detail", "Fencing token", "Updated", "Settle"),
        (
            [
                h(a.action),
                h(a.state.value.upper()),
                f"<code>{h(a.idempotency_key)}</code>",
                h(a.external_ref or "-"),
                h(a.detail or "-"),
                str(a.fencing_token),
                when(a.updated_at),
                settle_form(record, a, csrf, index),
            ]
            for index, a in enumerate(record.actions)
        ),
        empty="No external actions recorded.",
    )
    conflicts = _conflicts_note(record) + table(
        "Conflicting copies (same key, another type or payload; the original was kept)",
        ("Received", "Type", "Content type", "Payload"),
        (
            [
                when(c.received_at),
                h(c.event_type),
                content_type_code(c.content_type),
                _copy_payload(number, c) if show_payload else _digest(c),
            ]
            for number, c in enumerate(record.conflicts, start=1)
        ),
        empty="None.",
    )
    replays = table(
        "Replays: who and why",
        ("When", "Who", "State before", "Reason"),
        ([when(r.replayed_at), h(r.actor), h(r.state_before.value.upper()), h(r.reason)] for r in record.replays),
        empty="Never replayed.",
    )
    acts = table(
        "Operator actions: who, why, before and after",
        ("When", "Who", "Act", "Action", "Before", "After", "Reason"),
        (
            [when(a.acted_at), h(a.actor), h(a.kind.value), h(a.subject or "-"), h(a.before), h(a.after), h(a.reason)]
            for a in record.operator_actions
        ),
        empty="None.",
    )
    sections: tuple[tuple[str, str, str], ...] = (
        ("metadata", "Metadata", metadata),
        ("claims", "Claims", claims),
        ("actions", "Actions", actions),
        ("conflicts", "Conflicting copies", conflicts),
        ("replays", "Replays", replays),
        ("operator-actions", "Operator actions", acts),
    )
    if record.deliveries:
        sections += (("deliveries", "Deliveries", deliveries_table(record.deliveries)),)
    return "".join(
        f'<section aria-labelledby="{anchor}"><h2 id="{anchor}">{title}</h2>{content}</section>'
        for anchor, title, content in sections
    )


def _copy_payload(number: int, copy: ConflictingCopy) -> str:
    """A copy's payload by its own content type; its form fields' table named for the copy."""
    return payload_html(copy.payload, copy.content_type, f"Form fields of copy {number}")


def _digest(copy: ConflictingCopy) -> str:
    """A hidden copy by its payload's size and SHA-256, so copies can be told apart unread."""
    if copy.payload_sha256 is None:
        return "hidden"
    return f"hidden: {copy.payload_bytes} bytes, SHA-256 <code>{copy.payload_sha256.hex()[:16]}</code>…"


def _conflicts_note(record: EventRecord) -> str:
    """How many copies the key received, when more arrived than are kept (or than this page shows)."""
    overflow = record.conflicts_overflow
    if overflow is None and record.conflict_count <= len(record.conflicts):
        return ""
    note = f"{record.conflict_count} copies received; the first {KEPT_CONFLICT_COPIES} are kept whole"
    if overflow is not None:
        note += (
            f", {overflow.copies} more only counted (last {when(overflow.last_received_at)}, SHA-256 "
            f"<code>{overflow.last_payload_sha256.hex()[:16]}</code>…)"
        )
    return f"<p>{note}.</p>"


def _replay_form(record: EventRecord, csrf: str) -> str:
    s = record.summary
    if s.state not in REPLAYABLE:
        return ""
    return (
        '<section aria-labelledby="replay"><h2 id="replay">Replay</h2>'
        f'<form method="post" action="/replay" class="card">{csrf_input(csrf)}'
        f'<input type="hidden" name="event" value="{h(event_ref(s.namespace, s.event_key))}">'
        '<label for="reason">Reason (kept in the audit trail with your token\'s name)</label>'
        '<input id="reason" name="reason" required maxlength="4096">'
        '<button type="submit">Replay this event</button></form></section>'
    )


def notice_html(notice: Notice | None) -> str:
    """What an act did (a status), or why it was refused (an alert); nothing without a notice."""
    if notice is None:
        return ""
    if notice.refused:
        return f'<p class="error" role="alert">{h(notice.text)}</p>'
    return f'<p class="notice" role="status">{h(notice.text)}</p>'


def event_page(record: EventRecord, *, show_payload: bool, who: str, csrf: str, notice: Notice | None = None) -> str:
    body = notice_html(notice) + _facts(record) + _replay_form(record, csrf) + act_forms(record, csrf)
    body += _payload_section(record, show_payload) + _ledgers(record, show_payload, csrf)
    return page(f"Event {record.summary.event_key}", body, who=who, csrf=csrf, active="/events")
