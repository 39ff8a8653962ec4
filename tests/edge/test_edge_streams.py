"""The edge forwards over a pool of AcceptStreams: 2xx only on its item's answer, resent on a break, unary as fallback.

The relay (tests/edge/relay.py) is a real gRPC server on a real port in
front of the session's inboxd: it counts what the edge sends and breaks
streams on cue; inboxd behind it stores and answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import grpc
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.relay import Relay
from tests.edge.rig import (
    STRIPE_NEW_SECRET,
    Reply,
    as_body,
    post,
    routes_config,
    sign_standard,
    sign_stripe,
    std_account,
    stored_events,
)

FALLBACK_LINE = "inboxd does not serve AcceptStream"


@asynccontextmanager
async def relay_to(server: RunningServer, *, streams: bool = True) -> AsyncIterator[Relay]:
    relay = await Relay(f"127.0.0.1:{server.port}", streams=streams).start()
    try:
        yield relay
    finally:
        await relay.stop()


@asynccontextmanager
async def edge_to(target: str, **inboxd: Any) -> AsyncIterator[RunningEdge]:
    edge = await start_edge(config_from_data(routes_config(target, **inboxd), {}), listen="127.0.0.1:0")
    try:
        yield edge
    finally:
        await edge.stop()


def std_delivery(edge: RunningEdge, http: aiohttp.ClientSession, acct: str) -> Callable[[str], Any]:
    """A poster of one signed Standard Webhooks delivery per message id, on `acct`'s path."""

    async def deliver(msg_id: str) -> Reply:
        body = as_body({"type": "invoice.paid", "id": msg_id})
        return await post(http, f"{edge.url}/hooks/std/{acct}", body, sign_standard(body, msg_id, account=acct))

    return deliver


async def test_deliveries_go_over_the_pool_of_streams_in_turn_each_on_a_connection_of_its_own(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    async with relay_to(server) as relay, edge_to(relay.target, accept_streams=3) as edge:
        acct = std_account()
        deliver = std_delivery(edge, http, acct)
        replies = await asyncio.gather(*(deliver(f"msg_{i}") for i in range(6)))
        assert {(r.status, r.outcome) for r in replies} == {(200, "accepted")}
        assert relay.calls["Accept"] == 0
        # Three connections (client addresses), two items each: the pool takes turns.
        assert sorted(Counter(relay.item_peers).values()) == [2, 2, 2]
        assert set(await stored_events(db, f"std/{acct}")) == {f"msg_{i}" for i in range(6)}


async def test_an_item_whose_stream_breaks_after_its_commit_is_resent_and_answered_2xx_as_a_duplicate(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    async with relay_to(server) as relay, edge_to(relay.target, accept_streams=1) as edge:
        acct = std_account()
        relay.cut_after_commit.add("msg_cut")
        reply = await std_delivery(edge, http, acct)("msg_cut")
        # Committed on the first stream, unanswered there; the resend on the next stream finds it.
        assert (reply.status, reply.outcome) == (200, "duplicate")
        assert relay.items["msg_cut"] == 2
        assert relay.calls["Accept"] == 0
        assert list(await stored_events(db, f"std/{acct}")) == ["msg_cut"]


async def test_against_a_server_without_accept_stream_the_edge_falls_back_to_unary_accept_and_says_so_once(
    server: RunningServer, http: aiohttp.ClientSession, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    async with relay_to(server, streams=False) as relay, edge_to(relay.target) as edge:
        acct = std_account()
        deliver = std_delivery(edge, http, acct)
        with caplog.at_level(logging.INFO, logger="inboxd_edge"):
            replies = [await deliver("msg_1"), *await asyncio.gather(deliver("msg_2"), deliver("msg_3"))]
        assert [(r.status, r.outcome) for r in replies] == [(200, "accepted")] * 3
        assert relay.calls["Accept"] == 3
        assert sum(FALLBACK_LINE in record.getMessage() for record in caplog.records) == 1
        assert set(await stored_events(db, f"std/{acct}")) == {"msg_1", "msg_2", "msg_3"}


async def test_accept_mode_stream_never_falls_back_and_unary_never_opens_a_stream(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    acct = std_account()
    async with relay_to(server, streams=False) as relay, edge_to(relay.target, accept_mode="stream") as edge:
        reply = await std_delivery(edge, http, acct)("msg_forced")
        # As a unary Accept refused UNIMPLEMENTED is answered: an operator must look, the provider retries.
        # (grpc core now and then ends a stream on an unknown method INTERNAL, "Internal error from Core": 500 too.)
        assert reply.status == 500
        assert reply.outcome in {"unimplemented", "internal"}
        assert relay.calls["Accept"] == 0
    async with relay_to(server) as relay, edge_to(relay.target, accept_mode="unary") as edge:
        reply = await std_delivery(edge, http, acct)("msg_unary")
        assert (reply.status, reply.outcome) == (200, "accepted")
        assert (relay.calls["Accept"], relay.calls["AcceptStream"]) == (1, 0)
    assert list(await stored_events(db, f"std/{acct}")) == ["msg_unary"]


async def test_an_item_whose_stream_ends_for_good_is_sent_as_a_unary_accept_and_the_pool_goes_on(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    async with relay_to(server) as relay, edge_to(relay.target, accept_streams=1) as edge:
        acct = std_account()
        deliver = std_delivery(edge, http, acct)
        relay.end_stream_with["msg_end"] = grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await deliver("msg_end")).outcome == "accepted"
        assert relay.calls["Accept"] == 1
        # The slot has a fresh stream: the next delivery goes over it.
        assert (await deliver("msg_next")).outcome == "accepted"
        assert (relay.items["msg_next"], relay.calls["Accept"]) == (1, 1)
        assert set(await stored_events(db, f"std/{acct}")) == {"msg_end", "msg_next"}


async def test_a_stream_ended_for_good_while_idle_is_replaced_before_a_delivery_is_sent_on_it(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    async with relay_to(server) as relay:
        # The pool's first stream is ended (INTERNAL, as a proxy's timeout may end it) before any delivery.
        relay.end_opening_streams_with.append(grpc.StatusCode.INTERNAL)
        async with edge_to(relay.target, accept_streams=1, accept_mode="stream") as edge:
            assert edge.forwarder.pool is not None
            [ended] = edge.forwarder.pool.streams
            async with asyncio.timeout(5):
                # Returns once the stream has ended (its runner gone): the signal that it is broken.
                await ended.close()
            assert ended.broken is not None
            acct = std_account()
            reply = await std_delivery(edge, http, acct)("msg_idle")
            assert (reply.status, reply.outcome) == (200, "accepted")
            assert (relay.calls["AcceptStream"], relay.items["msg_idle"], relay.calls["Accept"]) == (2, 1, 0)
            assert list(await stored_events(db, f"std/{acct}")) == ["msg_idle"]


async def test_a_message_over_the_streams_size_limit_gets_the_unary_answer_400_and_its_neighbours_2xx(
    server: RunningServer, http: aiohttp.ClientSession, db: Database
) -> None:
    # A route that takes bodies larger than inboxd's payload limit (1 MiB): the stream's message is over one
    # Accept's size, which ends the stream (RESOURCE_EXHAUSTED); as a unary Accept it is INVALID_ARGUMENT.
    data = routes_config(f"127.0.0.1:{server.port}", accept_streams=1)
    data["routes"][1]["max_body_bytes"] = 4 * 1024 * 1024
    edge = await start_edge(config_from_data(data, {}), listen="127.0.0.1:0")
    try:
        account = f"acct_big_{std_account()}"
        url = f"{edge.url}/hooks/stripe"

        async def deliver(event_id: str, pad: int) -> Reply:
            body = as_body({"id": event_id, "type": "payment_intent.succeeded", "account": account, "pad": "x" * pad})
            return await post(http, url, body, sign_stripe(body, STRIPE_NEW_SECRET))

        big, small = await asyncio.gather(deliver("evt_big", 2 * 1024 * 1024), deliver("evt_small", 10))
        assert (big.status, big.outcome) == (400, "rejected")
        # The small one shared the stream the big one ended: inboxd may have committed it before the end, and
        # then its resend as a unary Accept finds it (DUPLICATE). Either way it is durably accepted, so 2xx.
        assert small.status == 200
        assert small.outcome in {"accepted", "duplicate"}
        assert (await deliver("evt_after", 10)).outcome == "accepted"
        assert edge.forwarder.streaming
        assert set(await stored_events(db, f"stripe/{account}")) == {"evt_small", "evt_after"}
    finally:
        await edge.stop()


@pytest.mark.parametrize(
    ("inboxd", "complaint"),
    [
        ({"accept_streams": 0}, "accept_streams must be a whole number from 1 to 64, not 0"),
        ({"accept_streams": "4"}, "accept_streams must be a whole number from 1 to 64, not '4'"),
        ({"accept_streams": True}, "accept_streams must be a whole number"),
        ({"accept_mode": "grpc"}, "accept_mode must be one of \\['auto', 'stream', 'unary'\\], not 'grpc'"),
    ],
)
def test_stream_settings_that_cannot_work_are_refused_naming_the_key(inboxd: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        config_from_data(routes_config("127.0.0.1:1", **inboxd), {})
