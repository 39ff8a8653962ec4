"""The console's HTML: escaping, the page frame, and the small formats every page shares.

Pages are plain strings. Every value that came from a caller or the database
passes through `h` (or `attrs`), so a namespace, key or error text can never
become markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from urllib.parse import urlencode

from aiohttp import web

from inboxd.domain.errors import (
    InboxError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TooManyRequests,
    TransitionNotAllowed,
    Unauthenticated,
    Unavailable,
)
from inboxd.domain.vocabulary import EventState

STATE_LABELS = {
    EventState.PENDING: "PENDING",
    EventState.PROCESSING: "PROCESSING",
    EventState.COMPLETED: "COMPLETED",
    EventState.DEAD_LETTERED: "DEAD_LETTERED",
}


_STATUS = {
    InvalidArgument: 400,
    Unauthenticated: 401,
    PermissionDenied: 403,
    NotFound: 404,
    TransitionNotAllowed: 409,
    TooManyRequests: 429,
    Unavailable: 503,
}


def error_status(exc: InboxError) -> int:
    """The HTTP status a page answers with for a refusal; 500 for a fault that is no refusal."""
    return next((_STATUS[k] for k in type(exc).__mro__ if k in _STATUS), 500)


def h(value: object) -> str:
    return html.escape(str(value), quote=True)


def url(path: str, params: Mapping[str, str | None] | None = None) -> str:
    """A link with its query string; empty parameters are left out."""
    kept = {k: v for k, v in (params or {}).items() if v}
    return path + ("?" + urlencode(kept) if kept else "")


def event_url(namespace: str, event_key: str) -> str:
    return url("/event", {"namespace": namespace, "key": event_key})


def when(value: datetime | None) -> str:
    """An instant in UTC to the second, in a <time> element; "-" when absent."""
    if value is None:
        return "-"
    shown = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return f'<time datetime="{h(value.isoformat())}">{shown}</time>'


def state_badge(state: EventState) -> str:
    return f'<span class="state state-{h(state.value)}">{STATE_LABELS[state]}</span>'


def table(caption: str, headers: Iterable[str], rows: Iterable[Iterable[str]], *, empty: str = "None.") -> str:
    """A table in a scrolling wrapper (readable at phone width); cells are already HTML."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{h(empty)}</p>'
    head = "".join(f'<th scope="col">{h(x)}</th>' for x in headers)
    return (
        f'<div class="scroll" role="region" aria-label="{h(caption)}" tabindex="0">'
        f"<table><caption>{h(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def csrf_input(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{h(token)}">'


_NAV = (
    ("/overview", "Overview"),
    ("/trends", "Trends"),
    ("/events", "Events"),
    ("/dead-letters", "Dead letters"),
    ("/flow", "Flow control"),
    ("/bulk", "Bulk operations"),
    ("/subscriptions", "Subscriptions"),
    ("/destinations", "Destinations"),
)


def page(title: str, body: str, *, who: str | None = None, csrf: str | None = None, active: str = "") -> str:
    """The whole document: skip link, navigation (when signed in), the content, the one script."""
    nav = ""
    if who is not None:
        links = "".join(
            f'<li><a href="{path}"{" aria-current=page" if path == active else ""}>{label}</a></li>'
            for path, label in _NAV
        )
        signout = (
            f'<form method="post" action="/signout" class="signout">{csrf_input(csrf or "")}'
            f'<span class="who">Signed in as <strong>{h(who)}</strong></span> '
            '<button type="submit">Sign out</button></form>'
        )
        nav = f'<nav aria-label="Main"><ul>{links}</ul>{signout}</nav>'
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{h(title)} · inboxd console</title>"
        '<link rel="stylesheet" href="/static/console.css">'
        '<script src="/static/console.js" defer></script></head>'
        '<body><a class="skip" href="#main">Skip to content</a>'
        f'<header><p class="brand"><a href="/overview">inboxd console</a></p>{nav}</header>'
        f'<main id="main" tabindex="-1"><h1>{h(title)}</h1>{body}</main></body></html>\n'
    )


def html_response(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def redirect(location: str) -> web.Response:
    """303 See Other: after a POST, the browser GETs the next page."""
    return web.Response(status=303, headers={"Location": location})
