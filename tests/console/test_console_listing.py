"""The console's filtered listings, through the Operators use case on a real PostgreSQL."""

from __future__ import annotations

import uuid

from inboxd.config.tokens import Caller, Scope
from inboxd.domain.operator_views import ListNarrowing
from inboxd.domain.vocabulary import EventState
from inboxd.serving.server import RunningServer
from inboxd.usecases.admin import ALL_STATES
from inboxd_client.v1 import inbox_pb2_grpc
from tests.integration.helpers import accept_request


async def _keys(
    server: RunningServer, namespace: str | None, narrowing: ListNarrowing, page_size: int = 2
) -> list[str]:
    """Every key the listing shows, page after page, as namespace/key."""
    assert server.ops is not None
    shown: list[str] = []
    after = None
    while True:
        page = await server.ops.operators.list_events(
            namespace=namespace, states=ALL_STATES, after=after, page_size=page_size, narrowing=narrowing
        )
        shown += [f"{e.namespace}/{e.event_key}" for e in page.events]
        if page.next_position is None:
            return shown
        after = page.next_position


async def test_a_listing_without_a_namespace_shows_only_the_granted_ones_with_like_wildcards_escaped(
    server: RunningServer, inbox: inbox_pb2_grpc.InboxServiceStub
) -> None:
    run = uuid.uuid4().hex[:8]
    granted, lookalike = f"acme_{run}", f"acmeX{run}"
    for ns in (f"{granted}/eu", f"{granted}/us", f"{lookalike}/eu"):
        for key in ("k1", "k2", "k3"):
            await inbox.Accept(accept_request(ns, key))
    caller = Caller("ops", frozenset({Scope.ADMIN}), (f"{granted}/*",))
    shown = await _keys(server, None, ListNarrowing(namespace_patterns=caller.like_patterns()))
    assert sorted(shown) == sorted(f"{granted}/{r}/{k}" for r in ("eu", "us") for k in ("k1", "k2", "k3"))
    assert len(shown) == len(set(shown)), "a page repeated an event"


async def test_a_listing_narrows_by_type_and_by_a_literal_key_prefix(
    server: RunningServer, inbox: inbox_pb2_grpc.InboxServiceStub, ns: str
) -> None:
    for key, event_type in (("inv_1", "invoice.paid"), ("inv_2", "invoice.paid"), ("inv_3", "invoice.voided"),
                            ("in%_4", "invoice.paid"), ("cus_1", "invoice.paid")):  # fmt: skip
        await inbox.Accept(accept_request(ns, key, event_type=event_type))
    paid = await _keys(server, ns, ListNarrowing(event_type="invoice.paid", key_prefix="inv_"))
    assert sorted(paid) == [f"{ns}/inv_1", f"{ns}/inv_2"]
    # The prefix is literal: % and _ are no wildcards.
    assert await _keys(server, ns, ListNarrowing(key_prefix="in%")) == [f"{ns}/in%_4"]
    assert await _keys(server, None, ListNarrowing(key_prefix="in%", namespace_patterns=(ns,))) == [f"{ns}/in%_4"]
    assert server.ops is not None
    dead = await server.ops.operators.list_events(
        namespace=ns, states=(EventState.DEAD_LETTERED,), narrowing=ListNarrowing(event_type="invoice.paid")
    )
    assert dead.events == []
