"""The console's subscriptions page: the subscriptions within the session's grants, and the forms to create and delete.

Each act goes through the subscriptions use case (the one behind
CreateSubscription and DeleteSubscription), which checks the session's
grants and audits the change under the session's token name; the page then
answers with the subscriptions as they stand and what changed, or the
refusal in words, on top. The console's guard has checked the Origin and
the CSRF token before a POST runs. A refusal is never a 500: bad input is
400, beyond the grants 403, no such subscription 404, a name taken by
another definition 409.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from inboxd.console.event_page import Notice, notice_html
from inboxd.console.form_fields import REFUSALS, text, texts
from inboxd.console.html import csrf_input, error_status, h, html_response, page, table, when
from inboxd.console.sessions import SessionOf
from inboxd.domain import validation
from inboxd.domain.errors import AlreadyExists, InboxError
from inboxd.domain.subscriptions import Subscription, SubscriptionSpec, copy_namespace, describe
from inboxd.usecases.admin import Operators

_WHY_HINT = "kept in the audit trail with your token's name"
_REFUSED = (*REFUSALS, AlreadyExists)


def _why(field: str, label: str) -> str:
    return (
        f'<label for="{field}">{h(label)} ({_WHY_HINT})</label>'
        f'<input id="{field}" name="reason" required maxlength="4096">'
    )


def _row(s: Subscription, csrf: str, index: int) -> list[str]:
    field = f"sub-{index}-delete-why"
    delete = (
        f'<form method="post" action="/subscriptions/delete" class="inline">{csrf_input(csrf)}'
        f'<input type="hidden" name="name" value="{h(s.name)}">'
        f'<label for="{field}">Why delete it ({_WHY_HINT})</label>'
        f'<input id="{field}" name="reason" required maxlength="4096">'
        f'<button type="submit" aria-label="Delete {h(s.name)}">Delete</button></form>'
    )
    return [
        f"<code>{h(s.name)}</code>",
        f"<code>{h(s.namespace_pattern)}</code>",
        h(", ".join(s.event_types) or "every type"),
        f"<code>{h(copy_namespace(s.name, '<namespace>'))}</code>",
        f"{h(s.created_by)}, {when(s.created_at)}",
        delete,
    ]


def create_form(csrf: str) -> str:
    return (
        '<section aria-labelledby="sub-create"><h2 id="sub-create">Create a subscription</h2>'
        f'<form method="post" action="/subscriptions/create" class="card">{csrf_input(csrf)}'
        "<p>Every new event accepted into a matching namespace is also stored, in the same transaction, as an "
        "event of the subscriber's own in <code>&lt;name&gt;/&lt;namespace&gt;</code>. The past is not copied.</p>"
        '<label for="sub-create-name">Subscriber (name)</label>'
        '<input id="sub-create-name" name="name" required maxlength="128">'
        '<label for="sub-create-pattern">Namespace or pattern</label>'
        '<input id="sub-create-pattern" name="namespace_pattern" required maxlength="512">'
        '<label for="sub-create-types">Event types (one per line; blank: every type)</label>'
        '<textarea id="sub-create-types" name="event_types" rows="2"></textarea>'
        + _why("sub-create-why", "Why create it")
        + '<button type="submit">Create subscription</button></form></section>'
    )


def subscriptions_page(subscriptions: Sequence[Subscription], *, who: str, csrf: str, notice: Notice | None) -> str:
    intro = (
        "<p>Fan-out at accept: each subscriber gets its own copy of every new event of the namespaces it "
        "subscribes to. A copy is an ordinary event (its own claims, retries, dead letters and replays); "
        "deleting a subscription keeps the copies it made.</p>"
    )
    rows = [_row(s, csrf, i) for i, s in enumerate(subscriptions)]
    headers = ("Name", "Namespaces", "Types", "Copies to", "Created", "")
    shown = table("Subscriptions, by name", headers, rows, empty="No subscriptions: every event is one job.")
    body = notice_html(notice) + intro + shown + create_form(csrf)
    return page("Subscriptions", body, who=who, csrf=csrf, active="/subscriptions")


def _types(raw: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in raw.replace(",", "\n").splitlines() if t.strip())


class SubscriptionForms:
    """The subscriptions page and its forms, through the operators' subscriptions use case."""

    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        self.session = session

    async def page(self, request: web.Request) -> web.Response:
        return await self._answer(request, None, 200)

    async def create(self, request: web.Request) -> web.Response:
        form = await request.post()
        status = 200
        try:
            reason = validation.required_reason(text(form, "reason"))
            raw_types = "\n".join(texts(form, "event_types"))
            spec = SubscriptionSpec(text(form, "name"), text(form, "namespace_pattern"), _types(raw_types))
            caller = self.session(request).caller
            made, created = await self.operators.create_subscription(spec, reason=reason, caller=caller)
            verb = "Created" if created else "Already stands:"
            words = describe(made.namespace_pattern, made.event_types)
            notice = Notice(f"{verb} {made.name} ({words}).", refused=False)
        except _REFUSED as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), _status(exc)
        return await self._answer(request, notice, status)

    async def delete(self, request: web.Request) -> web.Response:
        form = await request.post()
        status = 200
        try:
            reason = validation.required_reason(text(form, "reason"))
            caller = self.session(request).caller
            gone = await self.operators.delete_subscription(text(form, "name"), reason=reason, caller=caller)
            notice = Notice(f"Deleted {gone.name}; the copies it made stay.", refused=False)
        except _REFUSED as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), _status(exc)
        return await self._answer(request, notice, status)

    async def _answer(self, request: web.Request, notice: Notice | None, status: int) -> web.Response:
        session = self.session(request)
        found = await self.operators.list_subscriptions(caller=session.caller)
        body = subscriptions_page(found, who=session.caller.name, csrf=session.csrf, notice=notice)
        return html_response(body, status)


def _status(exc: InboxError) -> int:
    return 409 if isinstance(exc, AlreadyExists) else error_status(exc)
