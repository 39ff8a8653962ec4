"""The flow-control page's GET and its POSTs: pause, resume (with an optional ramp), set and remove a rule.

The console's guard has checked the Origin and the CSRF token before a POST
runs. Each act goes through the flow-control use case (the one behind
SetFlowControl), which checks the pattern against the session's grants and
audits the change under the session's token name; the page then answers
with the rules as they stand and what changed, or the refusal in words,
on top. A refusal is never a 500: bad input is 400, a pattern beyond the
grants 403, no such rule 404, a ramp on a rule that is not paused 409.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from aiohttp import web

from inboxd.config.tokens import Caller
from inboxd.console.event_page import Notice
from inboxd.console.flow_page import Lookup, flow_page
from inboxd.console.form_fields import REFUSALS as _REFUSALS
from inboxd.console.form_fields import decimal as _decimal
from inboxd.console.form_fields import text as _text
from inboxd.console.html import error_status, html_response
from inboxd.console.sessions import SessionOf
from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.flow_rules import FlowChange, RuleChanged, in_words
from inboxd.usecases.admin import Operators

if TYPE_CHECKING:
    from inboxd.console.form_fields import FormData


def _count(form: FormData, name: str) -> int | None:
    """A whole number from the form; blank is None (keep the rule's)."""
    text = _text(form, name)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument(name, f"{text!r} is not a whole number") from None


def _ramp(form: FormData) -> timedelta | None:
    seconds = _decimal(form, "ramp_seconds")
    return None if seconds is None else timedelta(seconds=seconds)


def _changed(verb: str, pattern: str, done: RuleChanged) -> str:
    return f"{verb} {pattern}: it was {in_words(done.before)}; it is {in_words(done.after)}."


Act = Callable[[str, str, "FormData"], FlowChange]


class FlowForms:
    """The flow-control page and its acting forms, through the operators' flow-control use case."""

    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        # The app's lookup of the request's signed-in session (a form needs no more of the app).
        self.session = session

    async def page(self, request: web.Request) -> web.Response:
        """The rules the session may see; with `namespace`, also what governs it."""
        session = self.session(request)
        namespace = request.query.get("namespace", "").strip()
        lookup, notice, status = None, None, 200
        if namespace:
            try:
                validation.check_identity("namespace", namespace)
                lookup = Lookup(namespace, await self.operators.get_flow_control(namespace, caller=session.caller))
            except _REFUSALS as exc:
                notice, status = Notice(f"Refused: {exc}", refused=True), error_status(exc)
        return await self._answer(session.caller, session.csrf, lookup, notice, status)

    async def pause(self, request: web.Request) -> web.Response:
        def change(pattern: str, reason: str, form: FormData) -> FlowChange:
            return FlowChange(pattern, reason, paused=True)

        return await self._acting(request, "Paused", change)

    async def resume(self, request: web.Request) -> web.Response:
        def change(pattern: str, reason: str, form: FormData) -> FlowChange:
            ramp_rate = _decimal(form, "ramp_rate") or 0.0
            return FlowChange(pattern, reason, paused=False, resume_ramp=_ramp(form), ramp_rate=ramp_rate)

        return await self._acting(request, "Resumed", change)

    async def set_rule(self, request: web.Request) -> web.Response:
        def change(pattern: str, reason: str, form: FormData) -> FlowChange:
            return FlowChange(
                pattern,
                reason,
                max_in_flight=_count(form, "max_in_flight"),
                rate=_decimal(form, "rate"),
                burst=_count(form, "burst"),
                weight=_count(form, "weight"),
            )

        return await self._acting(request, "Set", change)

    async def remove(self, request: web.Request) -> web.Response:
        def change(pattern: str, reason: str, form: FormData) -> FlowChange:
            return FlowChange(pattern, reason, remove=True)

        return await self._acting(request, "Removed", change)

    async def _acting(self, request: web.Request, verb: str, act: Act) -> web.Response:
        session = self.session(request)
        form = await request.post()
        pattern = _text(form, "pattern")
        status = 200
        try:
            # The reason first: a change without one is refused before anything else is looked at.
            reason = validation.required_reason(_text(form, "reason"))
            done = await self.operators.set_flow_control(act(pattern, reason, form), caller=session.caller)
            notice = Notice(_changed(verb, pattern, done), refused=False)
        except _REFUSALS as exc:
            notice, status = Notice(f"Refused: {exc}", refused=True), error_status(exc)
        lookup = None
        if pattern and status != 403:
            # What governs the pattern now, with its changes: the audit row this act just wrote on top.
            try:
                lookup = Lookup(pattern, await self.operators.get_flow_control(pattern, caller=session.caller))
            except _REFUSALS:
                lookup = None
        return await self._answer(session.caller, session.csrf, lookup, notice, status)

    async def _answer(
        self, caller: Caller, csrf: str, lookup: Lookup | None, notice: Notice | None, status: int
    ) -> web.Response:
        controls = await self.operators.list_flow_controls(caller=caller)
        # The inbox's clock (None: the database's now, which this host's clock stands in for here).
        now = self.operators.inbox.clock() or datetime.now(UTC)
        body = flow_page(controls, now=now, who=caller.name, csrf=csrf, lookup=lookup, notice=notice)
        return html_response(body, status)
