"""The console's destinations page over HTTP: the session's own destinations, a paused one resumed, deliveries shown.

Against a real inboxd with its console on a real PostgreSQL; destinations are
made through the admin API with the root token, the page is read with the
shop operator's session (granted only the shop's namespaces).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from inboxd.console.deliveries_html import deliveries_table
from inboxd.domain.destinations import DeliveryAttempt
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc
from tests.console.rig import Rig, cookie_jar, http_sign_in, page_csrf


async def _create(rig: Rig, name: str, pattern: str) -> None:
    await admin_pb2_grpc.InboxAdminServiceStub(rig.channel).CreateDestination(
        admin_pb2.CreateDestinationRequest(
            name=name, url="https://hooks.example.com/in", namespace_pattern=pattern, reason="test setup"
        ),
        metadata=[("authorization", f"Bearer {rig.tokens.root}")],
    )


async def _open_breaker(rig: Rig, name: str) -> None:
    """The breaker opened as the runner opens it (store: destination_failed at the threshold), five times over."""
    assert rig.server.ops is not None
    for _ in range(5):
        await rig.server.ops.operators.destination_failed(name, "5 failed deliveries in a row; the last: HTTP 503")


async def test_an_operator_sees_only_their_destinations_and_resumes_a_paused_one(rig: Rig) -> None:
    mine, theirs = f"{rig.shop}-billing", f"{rig.other}-crm"
    await _create(rig, mine, f"{rig.shop}/*")
    await _create(rig, theirs, f"{rig.other}/*")
    await _open_breaker(rig, mine)

    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        assert (await http_sign_in(http, rig.base, rig.tokens.operator)).status == 303
        async with http.get(f"{rig.base}/destinations") as answer:
            assert answer.status == 200
            listed = await answer.text()
        assert mine in listed and theirs not in listed
        assert "<strong>paused</strong>: 5 failed deliveries in a row; the last: HTTP 503" in listed

        form: dict[str, Any] = {"csrf": page_csrf(listed), "name": mine, "reason": ""}
        async with http.post(f"{rig.base}/destinations/resume", data=form) as refused:
            assert refused.status == 400
            assert "reason" in await refused.text()
        form["reason"] = "endpoint fixed"
        async with http.post(f"{rig.base}/destinations/resume", data=form) as resumed:
            assert resumed.status == 200
            text = await resumed.text()
        assert f"Resumed {mine}: its breaker is closed" in text
        form["name"] = theirs
        async with http.post(f"{rig.base}/destinations/resume", data=form) as foreign:
            assert foreign.status == 404


def test_an_events_deliveries_show_status_latency_outcome_and_the_answer_escaped() -> None:
    attempt = DeliveryAttempt(
        "billing", "shop/a", "k", "msg_1", 2, 7, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), 410,
        timedelta(milliseconds=42), "HTTP 410: <b>gone</b>", b"<b>gone</b>", "dead-lettered",
    )  # fmt: skip
    html = deliveries_table([attempt])
    assert "<td>410</td>" in html and "<td>42 ms</td>" in html and "<td>dead-lettered</td>" in html
    assert "&lt;b&gt;gone&lt;/b&gt;" in html and "<b>gone</b>" not in html
    assert "No destination has POSTed" in deliveries_table([])
