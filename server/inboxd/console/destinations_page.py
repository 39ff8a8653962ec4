"""The console's destinations page (push to HTTP), its resume form, and the deliveries table of an event's page.

The list shows every destination within the session's grants: where it
POSTs, what it serves, whether its breaker is open (with why and the next
try) and its failures in a row. A paused destination's row carries a form
that closes the breaker now (ResumeDestination's use case, audited under
the session's token name, with a reason). The guard has checked the Origin
and the CSRF token before the POST runs; a refusal is never a 500.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from inboxd.console.event_page import Notice, notice_html
from inboxd.console.form_fields import REFUSALS
from inboxd.console.form_fields import text as form_text
from inboxd.console.html import csrf_input, error_status, h, html_response, page, table, when
from inboxd.console.sessions import SessionOf
from inboxd.domain import validation
from inboxd.domain.destinations import Destination, DestinationState
from inboxd.usecases.admin import Operators


def _state(d: Destination) -> str:
    if d.state is DestinationState.ACTIVE:
        return "active"
    return f"<strong>paused</strong>: {h(d.paused_reason)} (next try {when(d.next_try_at)})"


def _resume_form(d: Destination, csrf: str) -> str:
    if d.state is not DestinationState.PAUSED:
        return ""
    return (
        f'<form method="post" action="/destinations/resume">{csrf_input(csrf)}'
        f'<input type="hidden" name="name" value="{h(d.name)}">'
        f'<label>Reason <input name="reason" required maxlength="4096"></label>'
        f'<button type="submit">Resume {h(d.name)} now</button></form>'
    )


def destinations_page(destinations: Sequence[Destination], *, who: str, csrf: str, notice: Notice | None = None) -> str:
    rows = (
        [
            h(d.name),
            f"<code>{h(d.spec.namespace_pattern)}</code>",
            f"<code>{h(d.spec.url)}</code>",
            _state(d),
            h(d.consecutive_failures),
            f"{when(d.created_at)} by {h(d.created_by)}",
            _resume_form(d, csrf),
        ]
        for d in destinations
    )
    body = notice_html(notice) + table(
        "Destinations: HTTP endpoints inboxd POSTs events to",
        ("Name", "Namespaces", "URL", "State", "Failures in a row", "Created", ""),
        rows,
        empty="No destinations. Create one with `inboxd destinations create`.",
    )
    return page("Destinations", body, who=who, csrf=csrf, active="/destinations")


class DestinationsForms:
    """The destinations page and its resume form, through the operators' destinations use case."""

    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        self.session = session

    async def page(self, request: web.Request) -> web.Response:
        session = self.session(request)
        listed = await self.operators.list_destinations(caller=session.caller)
        return html_response(destinations_page(listed, who=session.caller.name, csrf=session.csrf))

    async def resume(self, request: web.Request) -> web.Response:
        session = self.session(request)
        form = await request.post()
        name = form_text(form, "name")
        status = 200
        try:
            reason = validation.required_reason(form_text(form, "reason"))
            await self.operators.resume_destination(name, reason=reason, caller=session.caller)
            notice = Notice(f"Resumed {name}: its breaker is closed and it delivers again.", refused=False)
        except REFUSALS as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), error_status(exc)
        listed = await self.operators.list_destinations(caller=session.caller)
        body = destinations_page(listed, who=session.caller.name, csrf=session.csrf, notice=notice)
        return html_response(body, status)
