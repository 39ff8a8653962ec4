"""The POSTs of the event page's acting forms (act_forms.py): settle an action, end the claim, discard the event.

The console's guard has checked the Origin and the CSRF token before any of
these runs. Each checks the namespace against the session's grants, acts
through `Operators` (which refuses an act on a view that moved on), and
answers the event's page as it now stands, with what happened, or the
refusal, on top.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from inboxd.console.event_page import Notice, event_page
from inboxd.console.html import html_response
from inboxd.console.pages import parse_event_ref
from inboxd.console.sessions import SessionOf
from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument, TransitionNotAllowed
from inboxd.domain.operator_actions import ClaimEnding, Discarding, Settlement
from inboxd.domain.vocabulary import ActionState, EventState, FencingToken
from inboxd.usecases.admin import Operators

if TYPE_CHECKING:
    from multidict import MultiDictProxy

    # What aiohttp's request.post() answers.
    FormData = MultiDictProxy[str | bytes | bytearray | web.FileField]


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _token(form: FormData) -> FencingToken:
    try:
        return FencingToken(int(_text(form, "expected_fencing_token")))
    except ValueError:
        raise InvalidArgument("expected_fencing_token", "is not a number from this console's page") from None


def _offered(name: str, value: str) -> InvalidArgument:
    return InvalidArgument(name, f"{value!r} is not a state this console's page offers")


def _action_state(form: FormData, name: str) -> ActionState:
    try:
        return ActionState(_text(form, name))
    except ValueError:
        raise _offered(name, _text(form, name)) from None


def _event_state(form: FormData, name: str) -> EventState:
    try:
        return EventState(_text(form, name))
    except ValueError:
        raise _offered(name, _text(form, name)) from None


class OperatorForms:
    """The POST handlers of the acting forms; each answers the event's page, with what happened on top."""

    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        # The app's lookup of the request's signed-in session (a form needs no more of the app).
        self.session = session

    async def settle(self, request: web.Request) -> web.Response:
        async def act(namespace: str, key: str, form: FormData, actor: str) -> str:
            outcome, expected = _action_state(form, "outcome"), _action_state(form, "expected_state")
            settlement = Settlement(
                namespace, key, _text(form, "action"), outcome, _text(form, "external_ref"), "",
                _text(form, "reason"), expected, _token(form),
            )  # fmt: skip
            await self.operators.settle_action(settlement, actor=actor)
            return f"Settled {settlement.action} as {outcome.name}."

        return await self._acting(request, act)

    async def end_claim(self, request: web.Request) -> web.Response:
        async def act(namespace: str, key: str, form: FormData, actor: str) -> str:
            counted = _text(form, "count_attempt") == "1"
            ending = ClaimEnding(namespace, key, _token(form), counted, _text(form, "reason"))
            await self.operators.end_claim(ending, actor=actor)
            given = "counted" if counted else "given back"
            return f"Ended claim {ending.expected_fencing_token}: the event is PENDING, its attempt {given}."

        return await self._acting(request, act)

    async def discard(self, request: web.Request) -> web.Response:
        async def act(namespace: str, key: str, form: FormData, actor: str) -> str:
            expected = _event_state(form, "expected_state")
            await self.operators.discard(Discarding(namespace, key, expected, _text(form, "reason")), actor=actor)
            return "Discarded: the event is COMPLETED as IGNORED."

        return await self._acting(request, act)

    async def _acting(
        self,
        request: web.Request,
        act: Callable[[str, str, FormData, str], Awaitable[str]],
    ) -> web.Response:
        session = self.session(request)
        form = await request.post()
        namespace, event_key = parse_event_ref(_text(form, "event"))
        session.caller.require_namespace(namespace)
        validation.required_reason(_text(form, "reason"))
        status = 200
        try:
            notice = Notice(await act(namespace, event_key, form, session.caller.name), refused=False)
        except TransitionNotAllowed as exc:
            # The page moved on under the operator: show why, beside the event as it stands now.
            notice, status = Notice(f"Refused: {exc}", refused=True), 409
        record = await self.operators.get_event(namespace, event_key)
        body = event_page(record, show_payload=False, who=session.caller.name, csrf=session.csrf, notice=notice)
        return html_response(body, status)
