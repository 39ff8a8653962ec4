"""The console's list pages: sign-in, overview, events, dead letters, replay results, errors."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from inboxd.console.html import csrf_input, event_url, h, page, state_badge, table, url, when
from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_views import EventSummary, NamespaceStats, format_age
from inboxd.domain.vocabulary import ActionRecord, EventState


@dataclass(frozen=True)
class Listing:
    """One page of a listing as the console shows it: its events, the namespaces its filter offers, its pager."""

    events: Sequence[EventSummary]
    namespaces: Sequence[str]
    # The next page's token; None on the last page.
    next_token: str | None
    # Whether this is the first page (no "First page" link).
    first: bool


# How often the overview's numbers refresh themselves (console.js polls the fragment).
OVERVIEW_REFRESH_SECONDS = 5


@dataclass(frozen=True)
class EventFilters:
    """What the events page lists: each None means any."""

    namespace: str | None = None
    state: EventState | None = None
    event_type: str | None = None
    key_prefix: str | None = None

    def params(self) -> dict[str, str | None]:
        return {
            "namespace": self.namespace,
            "state": self.state.value if self.state else None,
            "type": self.event_type,
            "key_prefix": self.key_prefix,
        }


@dataclass(frozen=True)
class ReplayOutcome:
    namespace: str
    event_key: str
    # None when the replay happened; else why not.
    error: str | None


def event_ref(namespace: str, event_key: str) -> str:
    """One event as a form value: a dead-letter checkbox names both halves of its identity."""
    raw = json.dumps([namespace, event_key], ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def parse_event_ref(value: str) -> tuple[str, str]:
    try:
        namespace, event_key = json.loads(base64.urlsafe_b64decode(value.encode("ascii")).decode("utf-8"))
        if isinstance(namespace, str) and isinstance(event_key, str):
            return validation.check_identity("event", namespace), validation.check_identity("event", event_key)
    except (binascii.Error, UnicodeError, ValueError, TypeError):
        pass
    raise InvalidArgument("event", "is not an event reference from this console's page")


def signin_page(csrf: str, *, error: str | None, open_mode: bool) -> str:
    alert = f'<p class="error" role="alert">{h(error)}</p>' if error else ""
    if open_mode:
        hint = (
            "<p>inboxd runs without a tokens file. Sign in with the link it wrote in its log "
            "(<code>operators' console on http://…/signin?token=…</code>), or paste that token here. "
            "Each link signs in once; the log then names the next one.</p>"
        )
    else:
        hint = "<p>Sign in with a bearer token that holds the <code>admin</code> scope.</p>"
    body = (
        f'{alert}{hint}<form method="post" action="/signin" class="card">{csrf_input(csrf)}'
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" autofocus>'
        '<button type="submit">Sign in</button></form>'
    )
    return page("Sign in", body)


def _unresolved_link(s: NamespaceStats) -> str:
    if not s.unresolved_actions:
        return "0"
    return f'<a class="alert" href="{h(url("/unresolved", {"namespace": s.namespace}))}">{s.unresolved_actions}</a>'


def unresolved_page(namespace: str, found: Sequence[tuple[str, ActionRecord]], *, who: str, csrf: str) -> str:
    """The actions of a namespace nobody knows the outcome of, each linked to its event (where it is settled)."""
    rows = [
        [
            f'<a href="{h(event_url(namespace, key))}">{h(key)}</a>',
            h(a.action),
            h(a.state.value.upper()),
            f"<code>{h(a.idempotency_key)}</code>",
            str(a.fencing_token),
            when(a.updated_at),
            h(a.detail or "-"),
        ]
        for key, a in found
    ]
    headers = ("Event", "Action", "State", "Idempotency key", "Fencing token", "Since", "Detail")
    intro = (
        f"<p>Actions in <strong>{h(namespace)}</strong> whose outcome nobody recorded: UNKNOWN, or INTENDED too "
        "long. Look each up downstream by its idempotency key, then settle it on its event's page.</p>"
    )
    shown = table("Unresolved actions, oldest first", headers, rows, empty="None: every action is settled.")
    return page("Unresolved actions", intro + shown, who=who, csrf=csrf, active="/overview")


def _oldest_claimable(s: NamespaceStats) -> str:
    """The age, and, when a flow-control rule pauses the namespace, that it is paused: why the age grows."""
    age = h(format_age(s.oldest_claimable_age))
    if not s.paused:
        return age
    rule = h(url("/flow", {"namespace": s.namespace}))
    return f'{age} <a class="alert" href="{rule}" title="paused by flow-control rule {h(s.flow_rule)}">paused</a>'


def overview_fragment(stats: Sequence[NamespaceStats]) -> str:
    rows = []
    for s in stats:
        dead = str(s.dead_lettered)
        if s.dead_lettered:
            dead = f'<a class="alert" href="{h(url("/dead-letters", {"namespace": s.namespace}))}">{dead}</a>'
        processing = str(s.processing)
        if s.processing:
            # Who holds them, until when: a dead worker's events stand out there.
            held = url("/events", {"namespace": s.namespace, "state": EventState.PROCESSING.value})
            processing = f'<a href="{h(held)}">{processing}</a>'
        rows.append(
            [
                f'<a href="{h(url("/events", {"namespace": s.namespace}))}">{h(s.namespace)}</a>',
                str(s.pending),
                processing,
                str(s.completed),
                dead,
                _oldest_claimable(s),
                _unresolved_link(s),
                str(s.blocked_ordering_keys),
                format_age(s.oldest_blocked_age),
                str(s.connected_workers),
            ]
        )
    headers = (
        "Namespace", "Pending", "Processing", "Completed", "Dead letters", "Oldest claimable", "Unresolved",
        "Blocked keys", "Oldest blocked", "Workers",
    )  # fmt: skip
    return table("Events per namespace", headers, rows, empty="No events in the namespaces this token may see.")


def overview_page(stats: Sequence[NamespaceStats], *, who: str, csrf: str) -> str:
    body = (
        "<p>Counts by state per namespace. <em>Oldest claimable</em> is how long the oldest event a worker "
        "could take now has waited; <em>Unresolved</em> counts actions UNKNOWN or INTENDED too long; "
        "<em>Blocked keys</em> are ordering keys with a due event waiting behind another of its key, the "
        "longest for <em>Oldest blocked</em>.</p>"
        f'<div id="overview" data-refresh="/overview/fragment" data-every="{OVERVIEW_REFRESH_SECONDS}" '
        f'aria-live="polite">{overview_fragment(stats)}</div>'
        # After the table: the keyboard reaches the namespaces first.
        '<p><a href="/trends">Trends</a>: each namespace\'s last hours, minute by minute.</p>'
    )
    return page("Overview", body, who=who, csrf=csrf, active="/overview")


def _summary_rows(events: Sequence[EventSummary]) -> list[list[str]]:
    return [
        [
            h(e.namespace),
            f'<a href="{h(event_url(e.namespace, e.event_key))}">{h(e.event_key)}</a>',
            h(e.event_type),
            state_badge(e.state),
            str(e.attempt),
            when(e.accepted_at),
            f'<span class="error-text">{h(e.last_error)}</span>',
        ]
        for e in events
    ]


_SUMMARY_HEADERS = ("Namespace", "Key", "Type", "State", "Attempt", "Accepted", "Last error")
_PROCESSING_HEADERS = ("Namespace", "Key", "Type", "Worker", "Lease expires", "Attempt", "Accepted", "Last error")


def _processing_rows(events: Sequence[EventSummary]) -> list[list[str]]:
    """The processing list: who holds each event, until when, on which attempt (a dead worker's stands out)."""
    return [
        [
            h(e.namespace),
            f'<a href="{h(event_url(e.namespace, e.event_key))}">{h(e.event_key)}</a>',
            h(e.event_type),
            h(e.worker_id or "-"),
            when(e.lease_expires_at),
            str(e.attempt),
            when(e.accepted_at),
            f'<span class="error-text">{h(e.last_error)}</span>',
        ]
        for e in events
    ]


def _namespace_select(selected: str | None, namespaces: Sequence[str], *, everyone: str) -> str:
    choices = [("", everyone), *((n, n) for n in sorted({*namespaces, *([selected] if selected else [])}))]
    options = "".join(
        f'<option value="{h(v)}"{" selected" if v == (selected or "") else ""}>{h(label)}</option>'
        for v, label in choices
    )
    return f'<label for="namespace">Namespace</label><select id="namespace" name="namespace">{options}</select>'


def _pager(path: str, params: dict[str, str | None], listing: Listing) -> str:
    links = []
    if not listing.first:
        links.append(f'<a href="{h(url(path, params))}">First page</a>')
    if listing.next_token:
        links.append(f'<a rel="next" href="{h(url(path, {**params, "page": listing.next_token}))}">Next page</a>')
    return f'<nav class="pager" aria-label="Pages">{" ".join(links)}</nav>' if links else ""


def events_page(filters: EventFilters, listing: Listing, *, who: str, csrf: str) -> str:
    states = "".join(
        f'<option value="{s.value}"{" selected" if s == filters.state else ""}>{s.value.upper()}</option>'
        for s in EventState
    )
    form = (
        '<form method="get" action="/events" class="filters">'
        f"<div>{_namespace_select(filters.namespace, listing.namespaces, everyone='All I may see')}</div>"
        f'<div><label for="state">State</label><select id="state" name="state"><option value="">Any</option>'
        f"{states}</select></div>"
        f'<div><label for="type">Type</label><input id="type" name="type" value="{h(filters.event_type or "")}">'
        "</div>"
        '<div><label for="key_prefix">Key prefix</label>'
        f'<input id="key_prefix" name="key_prefix" value="{h(filters.key_prefix or "")}"></div>'
        '<div><button type="submit">Filter</button></div></form>'
    )
    headers: tuple[str, ...]
    if filters.state is EventState.PROCESSING:
        headers, rows = _PROCESSING_HEADERS, _processing_rows(listing.events)
    else:
        headers, rows = _SUMMARY_HEADERS, _summary_rows(listing.events)
    shown = table("Events, newest first", headers, rows, empty="No events match.")
    body = form + shown + _pager("/events", filters.params(), listing)
    return page("Events", body, who=who, csrf=csrf, active="/events")


def dead_letters_page(namespace: str | None, listing: Listing, *, who: str, csrf: str) -> str:
    pick = (
        '<form method="get" action="/dead-letters" class="filters">'
        f"<div>{_namespace_select(namespace, listing.namespaces, everyone='All I may see')}</div>"
        '<div><button type="submit">Show</button></div></form>'
    )
    rows = []
    for e in listing.events:
        ref = event_ref(e.namespace, e.event_key)
        box_id = "pick-" + ref.rstrip("=")
        rows.append(
            [
                f'<input type="checkbox" name="event" value="{h(ref)}" id="{h(box_id)}" '
                f'aria-label="Select {h(e.namespace)} {h(e.event_key)}">',
                h(e.namespace),
                f'<a href="{h(event_url(e.namespace, e.event_key))}">{h(e.event_key)}</a>',
                h(e.event_type),
                str(e.attempt),
                when(e.updated_at),
                f'<span class="error-text">{h(e.last_error)}</span>',
            ]
        )
    headers = ("Select", "Namespace", "Key", "Type", "Attempts", "Dead since", "Last error")
    shown = table("Dead-lettered events", headers, rows, empty="No dead letters. Nothing waits for you.")
    replay = ""
    if rows:
        replay = (
            f'<form method="post" action="/replay" id="replay-form">{csrf_input(csrf)}'
            '<p><label><input type="checkbox" data-select-all="event"> Select every event on this page</label></p>'
            f"{shown}"
            '<div class="card"><label for="reason">Reason (kept in the audit trail with your token\'s name)</label>'
            '<input id="reason" name="reason" required maxlength="4096">'
            '<button type="submit">Replay selected</button></div></form>'
        )
    params: dict[str, str | None] = {"namespace": namespace}
    body = pick + (replay or shown) + _pager("/dead-letters", params, listing)
    return page("Dead letters", body, who=who, csrf=csrf, active="/dead-letters")


def replay_result_page(outcomes: Sequence[ReplayOutcome], reason: str, *, who: str, csrf: str) -> str:
    done = sum(1 for o in outcomes if o.error is None)
    rows = [
        [
            h(o.namespace),
            f'<a href="{h(event_url(o.namespace, o.event_key))}">{h(o.event_key)}</a>',
            "replayed: now PENDING"
            if o.error is None
            else f'<span class="error-text">not replayed: {h(o.error)}</span>',
        ]
        for o in outcomes
    ]
    summary = f'<p role="status">Replayed {done} of {len(outcomes)} events, reason: <q>{h(reason)}</q>.</p>'
    body = summary + table("Replay results", ("Namespace", "Key", "Result"), rows)
    body += '<p><a href="/dead-letters">Back to dead letters</a></p>'
    return page("Replay", body, who=who, csrf=csrf, active="/dead-letters")


def error_page(status: int, message: str, *, who: str | None = None, csrf: str | None = None) -> str:
    body = f'<p class="error" role="alert">{h(message)}</p><p><a href="/overview">Back to the overview</a></p>'
    return page(f"{status}", body, who=who, csrf=csrf)
