"""The console's signed-in pages: each reads the request, checks grants, calls `Operators`, renders.

Namespace grants are checked as InboxAdminService checks them: a page that
names a namespace needs it granted; a page that names none shows only the
namespaces the token is granted (for the overview, by filtering the Stats
answer; for listings, by the token's patterns in the query itself).
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from inboxd.config.tokens import Caller
from inboxd.console.event_page import event_page
from inboxd.console.pages import (
    EventFilters,
    Listing,
    ReplayOutcome,
    dead_letters_page,
    events_page,
    overview_fragment,
    overview_page,
    parse_event_ref,
    replay_result_page,
    unresolved_page,
)
from inboxd.console.sessions import SessionOf
from inboxd.console.trends_page import trends_page
from inboxd.domain import validation
from inboxd.domain.conflict_copies import ConflictWindow
from inboxd.domain.errors import InboxError, InvalidArgument
from inboxd.domain.operator_views import ListNarrowing, NamespaceStats
from inboxd.domain.page_tokens import decode_page_token, encode_page_token
from inboxd.domain.vocabulary import EventState
from inboxd.observability.metrics import most_events_first
from inboxd.usecases.admin import ALL_STATES, Operators

PAGE_SIZE = 50
# The trends page draws at most this many namespaces (those with the most events first).
MAX_TREND_NAMESPACES = 100
# One Replay click may name at most this many events (a page of dead letters is PAGE_SIZE).
MAX_REPLAY_EVENTS = 500


def _html(body: str, status: int = 200) -> web.Response:
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


def _optional(request: web.Request, name: str, max_bytes: int = validation.MAX_IDENTITY_BYTES) -> str | None:
    value = request.query.get(name, "").strip()
    return validation.check_text(name, value, max_bytes) if value else None


class Views:
    def __init__(self, operators: Operators, session: SessionOf) -> None:
        self.operators = operators
        # The app's lookup of the request's signed-in session (a form needs no more of the app).
        self.session = session

    async def _visible_stats(self, caller: Caller) -> list[NamespaceStats]:
        stats = await self.operators.stats(None)
        return [s for s in stats if caller.may_see(s.namespace)]

    async def overview(self, request: web.Request) -> web.Response:
        session = self.session(request)
        stats = await self._visible_stats(session.caller)
        return _html(overview_page(stats, who=session.caller.name, csrf=session.csrf))

    async def overview_fragment(self, request: web.Request) -> web.Response:
        session = self.session(request)
        return _html(overview_fragment(await self._visible_stats(session.caller)))

    async def trends(self, request: web.Request) -> web.Response:
        """Charts of the namespaces the caller may see (or of the one `namespace` names)."""
        session = self.session(request)
        namespace = _optional(request, "namespace")
        if namespace is not None:
            session.caller.require_namespace(namespace)
            names = [namespace]
        else:
            stats = sorted(await self._visible_stats(session.caller), key=most_events_first)
            names = sorted(s.namespace for s in stats[:MAX_TREND_NAMESPACES])
        found = await self.operators.trends(names)
        return _html(trends_page(found, who=session.caller.name, csrf=session.csrf))

    async def _listing(self, request: web.Request, caller: Caller, filters: EventFilters) -> Listing:
        """One page of `filters`' events the caller may see, and the namespaces to offer in the filter."""
        if filters.namespace is not None:
            caller.require_namespace(filters.namespace)
        token = request.query.get("page", "")
        after = decode_page_token(token) if token else None
        patterns = ("%",) if caller.all_namespaces else caller.like_patterns()
        narrowing = ListNarrowing(filters.event_type, filters.key_prefix, patterns)
        states: Sequence[EventState] = (filters.state,) if filters.state else ALL_STATES
        page = await self.operators.list_events(
            namespace=filters.namespace, states=states, after=after, page_size=PAGE_SIZE, narrowing=narrowing
        )
        return Listing(
            events=page.events,
            namespaces=[s.namespace for s in await self._visible_stats(caller)],
            next_token=encode_page_token(page.next_position) if page.next_position else None,
            first="page" not in request.query,
        )

    async def events(self, request: web.Request) -> web.Response:
        session = self.session(request)
        state_text = _optional(request, "state")
        try:
            state = EventState(state_text) if state_text else None
        except ValueError:
            known = ", ".join(s.value for s in EventState)
            raise InvalidArgument("state", f"{state_text!r} is none of {known}") from None
        filters = EventFilters(
            namespace=_optional(request, "namespace"),
            state=state,
            event_type=_optional(request, "type"),
            key_prefix=_optional(request, "key_prefix"),
        )
        listing = await self._listing(request, session.caller, filters)
        return _html(events_page(filters, listing, who=session.caller.name, csrf=session.csrf))

    async def event(self, request: web.Request) -> web.Response:
        session = self.session(request)
        namespace = validation.check_identity("namespace", request.query.get("namespace", ""))
        event_key = validation.check_identity("key", request.query.get("key", ""))
        session.caller.require_namespace(namespace)
        show = request.query.get("payload") == "1"
        # The conflicting copies' payloads are read only when the page shows them.
        record = await self.operators.get_event(namespace, event_key, ConflictWindow(with_payloads=show))
        return _html(event_page(record, show_payload=show, who=session.caller.name, csrf=session.csrf))

    async def unresolved(self, request: web.Request) -> web.Response:
        session = self.session(request)
        namespace = validation.check_identity("namespace", request.query.get("namespace", ""))
        session.caller.require_namespace(namespace)
        found = await self.operators.unresolved_actions(namespace)
        return _html(unresolved_page(namespace, found, who=session.caller.name, csrf=session.csrf))

    async def dead_letters(self, request: web.Request) -> web.Response:
        session = self.session(request)
        filters = EventFilters(namespace=_optional(request, "namespace"), state=EventState.DEAD_LETTERED)
        listing = await self._listing(request, session.caller, filters)
        return _html(dead_letters_page(filters.namespace, listing, who=session.caller.name, csrf=session.csrf))

    async def replay(self, request: web.Request) -> web.Response:
        """Replays each selected event with one reason; one refusal never stops the others."""
        session = self.session(request)
        form = await request.post()
        raw_reason = form.get("reason")
        reason = validation.required_reason(raw_reason if isinstance(raw_reason, str) else "")
        refs = [r for r in form.getall("event", []) if isinstance(r, str)]
        if not refs:
            raise InvalidArgument("event", "select at least one event to replay")
        if len(refs) > MAX_REPLAY_EVENTS:
            raise InvalidArgument("event", f"{len(refs)} selected; replay at most {MAX_REPLAY_EVENTS} at once")
        outcomes = []
        for ref in refs:
            namespace, event_key = parse_event_ref(ref)
            try:
                session.caller.require_namespace(namespace)
                await self.operators.replay(namespace, event_key, reason=reason, actor=session.caller.name)
                outcomes.append(ReplayOutcome(namespace, event_key, None))
            except InboxError as exc:
                outcomes.append(ReplayOutcome(namespace, event_key, str(exc)))
        return _html(replay_result_page(outcomes, reason, who=session.caller.name, csrf=session.csrf))
