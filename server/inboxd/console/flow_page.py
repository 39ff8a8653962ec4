"""The console's flow-control page: the rules with their live figures, which rule governs a namespace, and the forms.

Each rule's row says what it allows against what it governs now (in flight
against max_in_flight, the rate and burst, paused or a ramp in progress,
the PENDING events it holds, this process's throttled claims) and who
changed it last. Each row carries its pause or resume form; below the table
stand the forms to set and remove a rule. Every form carries the session's
CSRF token and a reason for the audit; the POSTs are handled in
flow_forms.py, which answers this page again with what changed on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from inboxd.console.event_page import Notice, notice_html
from inboxd.console.html import csrf_input, h, page, table, when
from inboxd.domain.flow_rules import FlowControl, FlowRule, NamespaceFlow, in_words

# What the reason fields say, on every form of the page.
_WHY_HINT = "kept in the audit trail with your token's name"


@dataclass(frozen=True)
class Lookup:
    """The namespace search's answer: what governs `namespace` (a namespace or a rule's exact pattern)."""

    namespace: str
    found: NamespaceFlow


def _hhmm(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%MZ")


def _rate(value: float) -> str:
    return f"{value:g}/s"


def ramp_in_progress(rule: FlowRule, now: datetime) -> str | None:
    """A resume still ramping up, in words ("resuming, 40% of 100/s until 12:03Z"); None when none is."""
    if rule.paused or rule.resumed_at is None or rule.ramp is None or rule.ramp_rate is None:
        return None
    ends = rule.resumed_at + rule.ramp
    if now >= ends:
        return None
    share = max(0.0, (now - rule.resumed_at) / rule.ramp)
    return f"resuming, {share:.0%} of {_rate(rule.ramp_rate)} until {_hhmm(ends)}"


def state_words(rule: FlowRule, now: datetime) -> str:
    """Paused, resuming (the ramp's progress) or running."""
    if rule.paused:
        return "paused"
    return ramp_in_progress(rule, now) or "running"


def in_flight_words(control: FlowControl) -> str:
    """In flight against the limit: "3 / 5"; a pattern's limit holds for each namespace it governs."""
    rule, figures = control.rule, control.figures
    if rule.max_in_flight is None:
        return f"{figures.in_flight} / no limit"
    if rule.is_pattern:
        # The rule's figures sum the namespaces it governs that have open events; its limit binds each one.
        governed = f"{figures.namespaces} namespace" + ("" if figures.namespaces == 1 else "s")
        return f"{figures.in_flight} / {rule.max_in_flight} each, over {governed} with open events"
    return f"{figures.in_flight} / {rule.max_in_flight}"


def rate_words(rule: FlowRule) -> str:
    """The token bucket: "100/s, burst 20"; without a burst of its own, the bucket holds one second's rate."""
    if rule.rate is None:
        return "no limit"
    burst = f"burst {rule.burst}" if rule.burst is not None else "burst one second's worth"
    return f"{_rate(rule.rate)}, {burst}"


def _hidden_pattern(pattern: str) -> str:
    return f'<input type="hidden" name="pattern" value="{h(pattern)}">'


def _why(field: str, label: str) -> str:
    return (
        f'<label for="{field}">{h(label)} ({_WHY_HINT})</label>'
        f'<input id="{field}" name="reason" required maxlength="4096">'
    )


def pause_form(rule: FlowRule, csrf: str, index: int) -> str:
    field = f"flow-{index}-pause-why"
    return (
        f'<form method="post" action="/flow/pause" class="inline-form">{csrf_input(csrf)}'
        + _hidden_pattern(rule.pattern)
        + _why(field, f"Why pause {rule.pattern}")
        + f'<button type="submit">Pause {h(rule.pattern)}</button></form>'
    )


def resume_form(rule: FlowRule, csrf: str, index: int) -> str:
    field = f"flow-{index}-resume"
    return (
        f'<form method="post" action="/flow/resume" class="inline-form">{csrf_input(csrf)}'
        + _hidden_pattern(rule.pattern)
        + _why(f"{field}-why", f"Why resume {rule.pattern}")
        + f'<label for="{field}-ramp">Ramp {h(rule.pattern)} up over seconds (optional, 1 to 86400)</label>'
        f'<input id="{field}-ramp" name="ramp_seconds" inputmode="numeric">'
        f'<label for="{field}-rate">Ramp {h(rule.pattern)} up to events/s (optional: the rule\'s rate)</label>'
        f'<input id="{field}-rate" name="ramp_rate" inputmode="decimal">'
        f'<button type="submit">Resume {h(rule.pattern)}</button></form>'
    )


def _row(control: FlowControl, now: datetime, csrf: str, index: int) -> list[str]:
    rule = control.rule
    act = resume_form(rule, csrf, index) if rule.paused else pause_form(rule, csrf, index)
    held = f"{control.figures.pending} held" if rule.paused else str(control.figures.pending)
    return [
        f"<code>{h(rule.pattern)}</code>",
        str(rule.weight),
        h(in_flight_words(control)),
        h(rate_words(rule)),
        h(state_words(rule, now)),
        held,
        str(control.throttled_claims),
        f"{h(rule.updated_by or '-')}, {when(rule.updated_at)}",
        act,
    ]


_HEADERS = (
    "Pattern", "Weight", "In flight / max", "Rate", "State", "Pending", "Throttled here", "Last change", "Act",
)  # fmt: skip


def _search_form(namespace: str) -> str:
    return (
        '<form method="get" action="/flow" class="filters" role="search">'
        '<div><label for="flow-namespace">Which rule governs a namespace</label>'
        f'<input id="flow-namespace" name="namespace" value="{h(namespace)}" maxlength="512"></div>'
        '<div><button type="submit">Look up</button></div></form>'
    )


def _lookup(found: Lookup | None) -> str:
    if found is None:
        return ""
    answer, ns = found.found, found.namespace
    own = f"Its events leased now: {answer.figures.in_flight}; PENDING: {answer.figures.pending}."
    if answer.control is None:
        said = f"No rule governs <strong>{h(ns)}</strong>: no limits, weight 1. {h(own)}"
        return f'<section aria-label="Lookup"><p id="flow-lookup">{said}</p></section>'
    rule = answer.control.rule
    said = f"<strong>{h(ns)}</strong> is governed by <code>{h(rule.pattern)}</code>: {h(in_words(rule))}. {h(own)}"
    rows = [[when(c.changed_at), h(c.actor), h(c.reason), h(c.before), h(c.after)] for c in answer.changes]
    changes = table(
        f"Changes of {rule.pattern}, newest first",
        ("When", "Who", "Why", "Before", "After"),
        rows,
        empty="No changes recorded.",
    )
    return f'<section aria-label="Lookup"><p id="flow-lookup">{said}</p>{changes}</section>'


def _number(name: str, label: str) -> str:
    return (
        f'<label for="flow-set-{name}">{h(label)}</label><input id="flow-set-{name}" name="{name}" inputmode="decimal">'
    )


def set_form(csrf: str) -> str:
    """Creates or changes a rule: a blank field keeps what the rule has (a new rule: no limit); 0 removes it."""
    return (
        '<section aria-labelledby="flow-set"><h2 id="flow-set">Set a rule</h2>'
        f'<form method="post" action="/flow/set" class="card">{csrf_input(csrf)}'
        "<p>A namespace, or a pattern such as <code>mailera/*</code>; the most specific rule wins. A blank "
        "field keeps what the rule has; 0 removes a limit.</p>"
        '<label for="flow-set-pattern">Namespace or pattern</label>'
        '<input id="flow-set-pattern" name="pattern" required maxlength="512">'
        + _number("max_in_flight", "Max in flight")
        + _number("rate", "Rate (events/s)")
        + _number("burst", "Burst")
        + _number("weight", "Weight")
        + _why("flow-set-why", "Why set it")
        + '<button type="submit">Set rule</button></form></section>'
    )


def remove_form(rules: Sequence[FlowRule], csrf: str) -> str:
    if not rules:
        return ""
    options = "".join(f'<option value="{h(r.pattern)}">{h(r.pattern)}</option>' for r in rules)
    return (
        '<section aria-labelledby="flow-remove"><h2 id="flow-remove">Remove a rule</h2>'
        f'<form method="post" action="/flow/remove" class="card">{csrf_input(csrf)}'
        "<p>Its namespaces fall to the next most specific rule, or none.</p>"
        f'<label for="flow-remove-pattern">Rule to remove</label>'
        f'<select id="flow-remove-pattern" name="pattern">{options}</select>'
        + _why("flow-remove-why", "Why remove it")
        + '<button type="submit">Remove rule</button></form></section>'
    )


def flow_page(
    controls: Sequence[FlowControl],
    *,
    now: datetime,
    who: str,
    csrf: str,
    lookup: Lookup | None = None,
    notice: Notice | None = None,
) -> str:
    """The whole page: what changed (or why not), the namespace search, the rules, the forms."""
    intro = (
        "<p>Rules that pace the claims of the namespaces they govern, for every replica at once. <em>In "
        "flight</em> counts the events leased now; <em>Pending</em> the PENDING events (held while paused); "
        "<em>Throttled here</em> the claims this server process held back under the rule since it started.</p>"
    )
    rows = [_row(c, now, csrf, i) for i, c in enumerate(controls)]
    shown = table(
        "Flow-control rules, most specific first", _HEADERS, rows, empty="No rules: every namespace claims freely."
    )
    searched = lookup.namespace if lookup is not None else ""
    body = (
        notice_html(notice) + intro + _search_form(searched) + _lookup(lookup) + shown
        + set_form(csrf) + remove_form([c.rule for c in controls], csrf)
    )  # fmt: skip
    return page("Flow control", body, who=who, csrf=csrf, active="/flow")
