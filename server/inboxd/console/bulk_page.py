"""The console's bulk-operations pages: the filter form, its preview and confirmation, one operation's progress.

The form says what to act on (a namespace pattern, states, types, an
acceptance range, a substring of the last error, an ordering key), what to
do (replay, or ignore) and why, at what pace. **Preview** is a dry run: the
count and the first matches, each linked to its event. **Start…** is a dry
run too, answered with the confirmation in words ("Replay 9,812 events at
200/s, about 49 s") and the one button that starts it. An operation's page
follows its progress while it runs (console.js polls its JSON view; the
page works without it, a reload shows the same) and carries the Cancel
form. The POSTs are handled in bulk_forms.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from inboxd.console.event_page import Notice, notice_html
from inboxd.console.html import csrf_input, event_url, h, page, state_badge, table, url, when
from inboxd.domain.bulk_operations import BulkAction, BulkOperation, BulkState, states_words
from inboxd.domain.operator_views import EventSummary
from inboxd.domain.vocabulary import EventState

# How often an operation's page asks for its figures while it runs (seconds).
PROGRESS_EVERY_SECONDS = 1
# The states a bulk action may name (PROCESSING is never one: a worker holds it).
OFFERED_STATES = (EventState.PENDING, EventState.COMPLETED, EventState.DEAD_LETTERED)
_WHY_HINT = "kept in the audit trail with your token's name; an ignored event's disposition reason"


@dataclass(frozen=True)
class BulkDraft:
    """The form as the operator filled it in, as text: shown again with the preview, carried by the confirmation."""

    namespace_pattern: str = ""
    states: tuple[str, ...] = (EventState.DEAD_LETTERED.value,)
    event_types: str = ""
    accepted_since: str = ""
    accepted_until: str = ""
    error_contains: str = ""
    ordering_key: str = ""
    action: str = "replay"
    reason: str = ""
    rate: str = ""

    def fields(self) -> list[tuple[str, str]]:
        """(name, value) pairs as the form posts them: the confirmation's hidden fields."""
        pairs = [(name, value) for name, value in asdict(self).items() if name != "states"]
        return pairs + [("state", s) for s in self.states]


@dataclass(frozen=True)
class Preview:
    """A dry run's answer: how many events match now, the first of them, and what starting it would do."""

    matched: int
    first_matches: Sequence[EventSummary]
    plan: str
    # The confirmation step (Start…), rather than a look (Preview).
    confirming: bool = False
    draft: BulkDraft = field(default_factory=BulkDraft)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def duration_words(seconds: float) -> str:
    """A run's length, roughly: "about 49 s", "about 3 min", "about 2 h 5 min"."""
    whole = max(1, round(seconds))
    if whole < 90:
        return f"about {whole} s"
    minutes = round(whole / 60)
    if minutes < 90:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def rate_text(rate: float) -> str:
    return f"{rate:,.6g}/s"


def plan_words(action: BulkAction, matched: int, rate: float) -> str:
    """What starting would do: "Replay 9,812 events at 200/s, about 49 s"."""
    verb = {BulkAction.REPLAY: "Replay", BulkAction.IGNORE: "Ignore", BulkAction.COPY: "Copy"}[action]
    what = f"{verb} {_count(matched, 'event')}"
    if matched == 0:
        return f"{what}: nothing matches now"
    if rate <= 0:
        return f"{what} as fast as the chunks go (no rate)"
    return f"{what} at {rate_text(rate)}, {duration_words(matched / rate)}"


def _input(name: str, label: str, value: str, *, hint: str = "", required: bool = False, kind: str = "text") -> str:
    needed = " required" if required else ""
    said = f" ({h(hint)})" if hint else ""
    return (
        f'<div><label for="bulk-{name}">{h(label)}{said}</label>'
        f'<input id="bulk-{name}" name="{name}" type="{kind}" value="{h(value)}" maxlength="4096"{needed}></div>'
    )


def _states(draft: BulkDraft) -> str:
    boxes = "".join(
        f'<label><input type="checkbox" name="state" value="{s.value}"'
        f"{' checked' if s.value in draft.states else ''}> {s.value.upper()}</label>"
        for s in OFFERED_STATES
    )
    legend = "States (replay: COMPLETED, DEAD_LETTERED; ignore: PENDING, DEAD_LETTERED)"
    return f"<fieldset><legend>{legend}</legend>{boxes}</fieldset>"


def _actions(draft: BulkDraft) -> str:
    choices = (("replay", "Replay: back to PENDING, attempts reset, the action ledger kept"),
               ("ignore", "Ignore: complete as IGNORED with the reason"))  # fmt: skip
    radios = "".join(
        f'<label><input type="radio" name="action" value="{v}"{" checked" if v == draft.action else ""}> {h(t)}</label>'
        for v, t in choices
    )
    return f"<fieldset><legend>Action</legend>{radios}</fieldset>"


def bulk_form(draft: BulkDraft, csrf: str) -> str:
    """The filter, the action, the reason and the rate; Preview and Start… both answer a dry run first."""
    return (
        '<section aria-labelledby="bulk-new"><h2 id="bulk-new">A new operation</h2>'
        f'<form method="post" action="/bulk/preview" class="card bulk-form">{csrf_input(csrf)}'
        + _input("namespace_pattern", "Namespace or pattern", draft.namespace_pattern,
                 hint="such as shop/*", required=True)
        + _states(draft)
        + _input("event_types", "Event types", draft.event_types, hint="comma-separated; blank: any")
        + _input("accepted_since", "Accepted since", draft.accepted_since, hint="UTC, such as 2026-12-02T06:00")
        + _input("accepted_until", "Accepted before", draft.accepted_until, hint="UTC")
        + _input("error_contains", "Last error contains", draft.error_contains, hint="case-sensitive")
        + _input("ordering_key", "Ordering key", draft.ordering_key, hint="blank: any")
        + _actions(draft)
        + _input("reason", "Reason", draft.reason, hint=_WHY_HINT, required=True)
        + _input("rate", "Rate, events per second", draft.rate, hint="optional, up to 10,000; blank: no pace")
        + '<div class="buttons"><button type="submit" name="step" value="preview">Preview</button> '
        '<button type="submit" name="step" value="confirm">Start…</button></div></form></section>'
    )  # fmt: skip


def _match_rows(events: Sequence[EventSummary]) -> list[list[str]]:
    return [
        [
            h(e.namespace),
            f'<a href="{h(event_url(e.namespace, e.event_key))}">{h(e.event_key)}</a>',
            h(e.event_type),
            state_badge(e.state),
            when(e.accepted_at),
            f'<span class="error-text">{h(e.last_error)}</span>',
        ]
        for e in events
    ]


def _confirmation(preview: Preview, csrf: str) -> str:
    hidden = "".join(f'<input type="hidden" name="{h(n)}" value="{h(v)}">' for n, v in preview.draft.fields())
    return (
        '<section aria-labelledby="bulk-confirm"><h2 id="bulk-confirm">Confirm</h2>'
        f'<form method="post" action="/bulk/start" class="card">{csrf_input(csrf)}{hidden}'
        '<input type="hidden" name="confirmed" value="1">'
        f'<p id="bulk-plan"><strong>{h(preview.plan)}.</strong> Events that move on before their turn '
        "are skipped, and counted.</p>"
        f'<button type="submit">Start: {h(preview.plan)}</button></form></section>'
    )


def preview_html(preview: Preview, csrf: str) -> str:
    """The count and the first matches; at the confirmation step, the plan in words and its Start button."""
    shown = min(len(preview.first_matches), preview.matched)
    said = f"{_count(preview.matched, 'event')} match now"
    if shown < preview.matched:
        said += f"; the first {shown}, oldest accepted first"
    confirm = _confirmation(preview, csrf) if preview.confirming and preview.matched else ""
    matches = table(
        "First matches, oldest accepted first",
        ("Namespace", "Key", "Type", "State", "Accepted", "Last error"),
        _match_rows(preview.first_matches),
        empty="Nothing matches now.",
    )
    return (
        confirm + f'<section aria-labelledby="bulk-preview"><h2 id="bulk-preview">Preview</h2>'
        f'<p id="bulk-matched" role="status">{h(said)}. A dry run: nothing was changed.</p>{matches}</section>'
    )


def operation_url(op: BulkOperation) -> str:
    return url("/bulk/operation", {"id": str(op.id)})


def state_word(op: BulkOperation) -> str:
    return op.state.name + (" (dry run)" if op.dry_run else "")


def action_word(op: BulkOperation) -> str:
    return op.action.value


def _recent_rows(operations: Sequence[BulkOperation]) -> list[list[str]]:
    return [
        [
            f'<a href="{h(operation_url(op))}"><code>{h(op.id)}</code></a>',
            h(action_word(op)),
            f"<code>{h(op.filter.namespace_pattern)}</code>",
            h(state_word(op)),
            f"{op.done:,} / {op.matched:,}",
            f"{op.skipped:,}",
            h(op.actor),
            when(op.started_at),
        ]
        for op in operations
    ]


def bulk_page(
    draft: BulkDraft,
    operations: Sequence[BulkOperation],
    *,
    who: str,
    csrf: str,
    preview: Preview | None = None,
    notice: Notice | None = None,
) -> str:
    """The whole page: what happened (or why not), the preview, the form, the recent operations."""
    intro = (
        "<p>Replay, or ignore, every event a filter matches, in the background, at a pace that spares the "
        "downstream. Each event changed gets the audit row a single Replay or Discard writes, naming the "
        "operation. Look first: <em>Preview</em> counts the matches and changes nothing.</p>"
    )
    recent = table(
        "Recent operations, newest first",
        ("Operation", "Action", "Pattern", "State", "Done / matched", "Skipped", "By", "Started"),
        _recent_rows(operations),
        empty="No operations yet.",
    )
    shown = preview_html(preview, csrf) if preview is not None else ""
    body = notice_html(notice) + intro + shown + bulk_form(draft, csrf) + recent
    return page("Bulk operations", body, who=who, csrf=csrf, active="/bulk")


def shown_figures(op: BulkOperation) -> dict[str, str]:
    """An operation's figures in words, by field: the page's cells, and what its script puts in them."""
    return {
        "state": state_word(op),
        "progress": f"{op.done:,} / {op.matched:,}",
        "skipped": f"{op.skipped:,}",
        "measured_rate": rate_text(op.measured_rate),
    }


def operation_json(op: BulkOperation) -> dict[str, object]:
    """The operation page's JSON view: the figures as numbers, and as the page words them."""
    return {
        "id": str(op.id),
        "state": op.state.name,
        "matched": op.matched,
        "done": op.done,
        "skipped": op.skipped,
        "measured_rate": op.measured_rate,
        "shown": shown_figures(op),
    }


def _filter_words(op: BulkOperation) -> list[tuple[str, str]]:
    f = op.filter
    since = when(f.accepted_from) if f.accepted_from else "any time"
    until = when(f.accepted_until) if f.accepted_until else "now"
    return [
        ("Pattern", f"<code>{h(f.namespace_pattern)}</code>"),
        ("States", h(states_words(f.states))),
        ("Types", h(", ".join(f.event_types) or "any")),
        ("Accepted", f"{since} to {until}"),
        ("Last error contains", h(f.error_contains or "anything")),
        ("Ordering key", h(f.ordering_key or "any")),
    ]


def cancel_words(op: BulkOperation) -> str:
    """What a cancel did: stopped the operation, or found it ended already (it answers it as it stands)."""
    counts = f"{_count(op.done, 'event')} changed, {op.skipped:,} skipped"
    if op.state is BulkState.DONE:
        return f"It had finished before the cancel reached it: {counts}."
    if op.state is BulkState.FAILED:
        return f"It had failed before the cancel reached it: {counts}."
    return f"Cancelled: {counts}; nothing more will be."


def cancel_form(op: BulkOperation, csrf: str) -> str:
    if op.state is not BulkState.RUNNING:
        return ""
    return (
        '<section aria-labelledby="bulk-cancel"><h2 id="bulk-cancel">Cancel</h2>'
        f'<form method="post" action="/bulk/cancel" class="card">{csrf_input(csrf)}'
        f'<input type="hidden" name="id" value="{h(op.id)}">'
        "<p>It stops between two chunks: what it changed stays changed, and its counts are then exact.</p>"
        '<label for="bulk-cancel-why">Why cancel it (kept in the audit trail with your token\'s name)</label>'
        '<input id="bulk-cancel-why" name="reason" required maxlength="4096">'
        '<button type="submit">Cancel this operation</button></form></section>'
    )


def operation_page(op: BulkOperation, *, who: str, csrf: str, notice: Notice | None = None) -> str:
    """One operation: its progress (followed live while it runs), what it acts on, and the Cancel form."""
    figures = shown_figures(op)
    running = op.state is BulkState.RUNNING
    follow = f' data-progress="/bulk/operation.json?id={h(op.id)}" data-every="{PROGRESS_EVERY_SECONDS}"'
    handled = op.done + op.skipped
    bar = f'<progress max="{max(op.matched, 1)}" value="{handled}" aria-label="Progress"></progress>'
    facts = [
        ("State", f'<span data-field="state">{h(figures["state"])}</span>'),
        ("Done / matched", f'<span data-field="progress">{h(figures["progress"])}</span>'),
        ("Skipped (moved on)", f'<span data-field="skipped">{h(figures["skipped"])}</span>'),
        ("Rate", h(rate_text(op.rate) if op.rate > 0 else "no pace")),
        ("Measured rate", f'<span data-field="measured_rate">{h(figures["measured_rate"])}</span>'),
        ("Action", h(action_word(op))),
        ("Reason", h(op.reason)),
        ("Started", f"{when(op.started_at)} by {h(op.actor)}"),
        ("Finished", when(op.finished_at)),
        *(([("Cancelled by", h(op.cancelled_by))]) if op.cancelled_by else []),
        *(([("Error", f'<span class="error-text">{h(op.error)}</span>')]) if op.error else []),
        *_filter_words(op),
    ]
    items = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in facts)
    progress = (
        f'<section aria-labelledby="bulk-progress"{follow if running else ""}>'
        f'<h2 id="bulk-progress">Progress</h2>{bar}<dl class="facts" aria-live="polite">{items}</dl></section>'
    )
    back = '<p><a href="/bulk">All bulk operations</a></p>'
    body = notice_html(notice) + progress + cancel_form(op, csrf) + back
    return page(f"Bulk operation {op.id}", body, who=who, csrf=csrf, active="/bulk")
