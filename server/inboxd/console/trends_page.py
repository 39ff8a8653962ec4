"""The console's trends page: per namespace, small inline SVG charts of the last hours, one point a minute.

No chart library and no script: each chart is an `<svg>` drawn here, styled
by console.css through classes (the CSP allows no inline style), and says its
numbers in words (its `<title>` and the figures beside it) for screen readers
and for an operator who wants the figure, not the shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from inboxd.console.html import h, page, url
from inboxd.domain.operator_views import format_age
from inboxd.domain.trends import TRENDS_WINDOW, NamespaceTrend

# The drawing's own units; the SVG stretches to its box's width (phone or desk).
_WIDTH, _HEIGHT = 360, 40


def _hhmm(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%MZ")


def _path(values: Sequence[float | None], top: float) -> str:
    """An SVG path through the points, one per minute; a gap where a minute has no value."""
    step = _WIDTH / max(len(values) - 1, 1)
    parts: list[str] = []
    pen_down = False
    for i, value in enumerate(values):
        if value is None:
            pen_down = False
            continue
        x = i * step
        y = _HEIGHT - 1 - (value / top) * (_HEIGHT - 2) if top > 0 else _HEIGHT - 1
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f} {y:.1f}")
        pen_down = True
    return " ".join(parts)


def sparkline(kind: str, title: str, values: Sequence[float | None]) -> str:
    """One chart: a line scaled to its own peak, with its words in <title>; `kind` names its CSS class."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    path = _path(values, top)
    line = f'<path class="line" d="{path}" vector-effect="non-scaling-stroke"/>' if path else ""
    return (
        f'<svg class="spark spark-{h(kind)}" viewBox="0 0 {_WIDTH} {_HEIGHT}" preserveAspectRatio="none" '
        f'role="img" aria-label="{h(title)}"><title>{h(title)}</title>'
        f'<line class="base" x1="0" y1="{_HEIGHT - 0.5}" x2="{_WIDTH}" y2="{_HEIGHT - 0.5}"/>{line}</svg>'
    )


def _per_minute(name: str, kind: str, values: Sequence[int], minutes: Sequence[datetime]) -> str:
    total, latest = sum(values), values[-1] if values else 0
    peak = max(values, default=0)
    at = f" at {_hhmm(minutes[values.index(peak)])}" if peak else ""
    figures = f"{total} in all, peak {peak}/min{at}, last minute {latest}"
    title = f"{name} per minute over the last {_hours()}: {figures}"
    return _chart(name, kind, sparkline(kind, title, [float(v) for v in values]), figures)


def _ages(trend: NamespaceTrend) -> str:
    ages = trend.oldest_claimable
    known = [a for a in ages if a is not None]
    if known:
        latest = next(a for a in reversed(ages) if a is not None)
        figures = f"now {_age(latest)}, worst {_age(max(known))}"
    else:
        figures = "not recorded yet"
    title = f"Oldest claimable age over the last {_hours()}: {figures}"
    return _chart("Oldest claimable", "age", sparkline("age", title, ages), figures)


def _age(seconds: float) -> str:
    return format_age(timedelta(seconds=seconds))


def _hours() -> str:
    return f"{TRENDS_WINDOW.total_seconds() / 3600:g} hours"


def _chart(name: str, kind: str, svg: str, figures: str) -> str:
    return (
        f'<div class="trend trend-{h(kind)}"><p class="trend-name">{h(name)}</p>{svg}'
        f'<p class="trend-figures">{h(figures)}</p></div>'
    )


def namespace_trends(trend: NamespaceTrend) -> str:
    """One namespace's four charts, under its name (linked to its events)."""
    minutes = trend.minutes
    charts = (
        _per_minute("Accepted", "accepted", trend.accepted, minutes)
        + _per_minute("Completed", "completed", trend.completed, minutes)
        + _per_minute("Dead-lettered", "dead", trend.dead_lettered, minutes)
        + _ages(trend)
    )
    events = url("/events", {"namespace": trend.namespace})
    span = f"{_hhmm(minutes[0])} to {_hhmm(minutes[-1])}" if minutes else ""
    return (
        f'<section class="trends" aria-label="Trends of {h(trend.namespace)}">'
        f'<h2><a href="{h(events)}">{h(trend.namespace)}</a> <span class="span">{h(span)}</span></h2>'
        f'<div class="trend-grid">{charts}</div></section>'
    )


def trends_page(trends: Sequence[NamespaceTrend], *, who: str, csrf: str) -> str:
    intro = (
        f"<p>Per namespace, the last {_hours()} one minute a point: events accepted (new, not repeats), "
        "completed, and dead-lettered by a worker's Fail, each minute, and how long the oldest claimable "
        "event had waited. Every server process writes its counts once a minute, so the last minute is up "
        "to a minute late. Each chart is scaled to its own peak.</p>"
    )
    body = "".join(namespace_trends(t) for t in trends)
    if not body:
        body = '<p class="empty">No events in the namespaces this token may see.</p>'
    return page("Trends", intro + body, who=who, csrf=csrf, active="/trends")
