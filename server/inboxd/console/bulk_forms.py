"""The bulk-operations pages' GETs and POSTs: preview (a dry run), start after its confirmation, follow, cancel.

The console's guard has checked the Origin and the CSRF token before a POST
runs. Every act goes through the bulk-operations use case (the one behind
StartBulkOperation and CancelBulkOperation), which checks the filter's
pattern against the session's grants, validates every field, and audits
under the session's token name; the page answers with what happened, or
the refusal in words beside the form as the operator filled it in. A
refusal is never a 500: bad input is 400, a pattern or an operation beyond
the grants 403, an unknown operation 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from inboxd.config.tokens import Caller
from inboxd.console.bulk_page import (
    BulkDraft,
    Preview,
    bulk_page,
    cancel_words,
    operation_json,
    operation_page,
    operation_url,
    plan_words,
)
from inboxd.console.event_page import Notice
from inboxd.console.form_fields import REFUSALS, decimal, instant, text, texts
from inboxd.console.html import error_status, html_response, redirect
from inboxd.console.sessions import SessionOf
from inboxd.domain.bulk_operations import DEFAULT_STATES, BulkAction, BulkFilter, BulkRequest
from inboxd.domain.errors import InboxError, InvalidArgument
from inboxd.domain.vocabulary import EventState
from inboxd.usecases.admin import Operators

if TYPE_CHECKING:
    from inboxd.console.form_fields import FormData

# The recent operations the page lists (ListBulkOperations' first page).
RECENT_OPERATIONS = 20


def draft_of(form: FormData) -> BulkDraft:
    """The form as typed; with no state ticked the request acts on DEAD_LETTERED events, the contract's default."""
    return BulkDraft(
        namespace_pattern=text(form, "namespace_pattern"),
        states=texts(form, "state"),
        event_types=text(form, "event_types"),
        accepted_since=text(form, "accepted_since"),
        accepted_until=text(form, "accepted_until"),
        error_contains=text(form, "error_contains"),
        ordering_key=text(form, "ordering_key"),
        action=text(form, "action") or "replay",
        reason=text(form, "reason"),
        rate=text(form, "rate"),
    )


def _states(values: tuple[str, ...]) -> tuple[EventState, ...]:
    try:
        return tuple(EventState(v) for v in values)
    except ValueError:
        raise InvalidArgument("state", f"{values!r} names a state this console's page does not offer") from None


def start_of(form: FormData, *, dry_run: bool) -> BulkRequest:
    """The use case's request from the form; a field that does not parse is refused by its name.

    The use case checks the rest (the pattern, the states against the action, the reason, the rate's range).
    """
    draft = draft_of(form)
    try:
        action = BulkAction(draft.action)
    except ValueError:
        raise InvalidArgument("action", f"{draft.action!r} is neither replay nor ignore") from None
    found = BulkFilter(
        namespace_pattern=draft.namespace_pattern,
        event_types=tuple(t.strip() for t in draft.event_types.split(",") if t.strip()),
        states=_states(draft.states) or DEFAULT_STATES,
        accepted_from=instant(form, "accepted_since"),
        accepted_until=instant(form, "accepted_until"),
        error_contains=draft.error_contains,
        ordering_key=draft.ordering_key,
    )
    return BulkRequest(found, action, draft.reason, rate=decimal(form, "rate") or 0.0, dry_run=dry_run)


def _operation_id(form: FormData) -> str:
    # The use case checks it: required, and one that names no operation is unknown (404).
    return text(form, "id")


class BulkForms:
    """The bulk-operations page, an operation's page and its JSON view, and the acting POSTs."""

    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        # The app's lookup of the request's signed-in session (a form needs no more of the app).
        self.session = session

    async def page(self, request: web.Request) -> web.Response:
        """The form (filled in from the query, so a link can propose a filter) and the recent operations."""
        session = self.session(request)
        draft = draft_of(request.query) if request.query else BulkDraft()
        return await self._answer(session.caller, session.csrf, draft)

    async def preview(self, request: web.Request) -> web.Response:
        """A dry run: the count and the first matches; with step=confirm, also the plan and its Start button."""
        session = self.session(request)
        form = await request.post()
        draft, preview, notice, status = draft_of(form), None, None, 200
        try:
            start = start_of(form, dry_run=True)
            started = await self.operators.start_bulk_operation(start, caller=session.caller)
            matched = started.operation.matched
            plan = plan_words(start.action, matched, start.rate)
            confirming = text(form, "step") == "confirm"
            preview = Preview(matched, started.first_matches, plan, confirming=confirming, draft=draft)
        except REFUSALS as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), error_status(exc)
        return await self._answer(session.caller, session.csrf, draft, preview=preview, notice=notice, status=status)

    async def start(self, request: web.Request) -> web.Response:
        """Starts the operation the confirmation carries; answers its page (303), or the refusal on the form."""
        session = self.session(request)
        form = await request.post()
        draft = draft_of(form)
        try:
            if text(form, "confirmed") != "1":
                raise InvalidArgument("confirmed", "start from the confirmation: Start… shows what will happen first")
            start = start_of(form, dry_run=False)
            started = await self.operators.start_bulk_operation(start, caller=session.caller)
        except REFUSALS as exc:
            notice = Notice(f"Refused: {exc}", refused=True)
            return await self._answer(session.caller, session.csrf, draft, notice=notice, status=error_status(exc))
        return redirect(operation_url(started.operation))

    async def operation(self, request: web.Request) -> web.Response:
        session = self.session(request)
        op = await self.operators.get_bulk_operation(_operation_id(request.query), caller=session.caller)
        return html_response(operation_page(op, who=session.caller.name, csrf=session.csrf))

    async def operation_json(self, request: web.Request) -> web.Response:
        """What the operation page's script follows; a refusal is JSON too, with its status."""
        session = self.session(request)
        try:
            op = await self.operators.get_bulk_operation(_operation_id(request.query), caller=session.caller)
        except InboxError as exc:
            return web.json_response({"error": str(exc)}, status=error_status(exc))
        return web.json_response(operation_json(op))

    async def cancel(self, request: web.Request) -> web.Response:
        """Cancels between chunks; answers the operation's page with its exact counts, or the refusal."""
        session = self.session(request)
        form = await request.post()
        op_id = _operation_id(form)
        status = 200
        try:
            op = await self.operators.cancel_bulk_operation(op_id, reason=text(form, "reason"), caller=session.caller)
            notice = Notice(cancel_words(op), refused=False)
        except REFUSALS as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), error_status(exc)
            op = await self.operators.get_bulk_operation(op_id, caller=session.caller)
        body = operation_page(op, who=session.caller.name, csrf=session.csrf, notice=notice)
        return html_response(body, status)

    async def _answer(
        self,
        caller: Caller,
        csrf: str,
        draft: BulkDraft,
        *,
        preview: Preview | None = None,
        notice: Notice | None = None,
        status: int = 200,
    ) -> web.Response:
        recent = await self.operators.list_bulk_operations(after=None, page_size=RECENT_OPERATIONS, caller=caller)
        body = bulk_page(draft, recent.operations, who=caller.name, csrf=csrf, preview=preview, notice=notice)
        return html_response(body, status)
