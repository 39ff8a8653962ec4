"""What an operator watches on a running edge process: health, readiness, metrics, SIGHUP reloads, JSON logs."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from tests.edge.edge_process import SECOND_SECRET, EdgeProcess, edge_process, routes_toml, stripe_delivery
from tests.edge.rig import STRIPE_NEW_SECRET, stored_events
from tests.harness import ServerProcess

METRICS = '\n[metrics]\nlisten = "127.0.0.1:0"\n'


async def eventually(check: Callable[[], object], within: float = 15.0) -> None:
    """Waits until `check()` is truthy (awaiting it when it is a coroutine), at most `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        assert time.monotonic() < deadline, "not within the timeout"
        await asyncio.sleep(0.1)


async def get_status(http: aiohttp.ClientSession, url: str) -> int:
    try:
        async with http.get(url) as response:
            return response.status
    except aiohttp.ClientError:
        return 0


async def deliver(
    http: aiohttp.ClientSession, url: str, *, tamper: bool = False, secret: str = STRIPE_NEW_SECRET
) -> tuple[int, str]:
    body, headers, acct = stripe_delivery(secret=secret)
    if tamper:
        body = body.replace(b"succeeded", b"succeedeX")
    async with http.post(url, data=body, headers=headers) as response:
        return response.status, acct


def metrics_port(edge: EdgeProcess) -> int:
    found = re.search(r"metrics on \S+ \(port (\d+)\)", edge.log())
    assert found, edge.log()
    return int(found.group(1))


async def scrape(http: aiohttp.ClientSession, port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
async def inboxd_process(migrated_url: str) -> AsyncIterator[ServerProcess]:
    """An inboxd of this test's own, in a process the test can kill (and start again on its port)."""
    proc = await asyncio.to_thread(ServerProcess(migrated_url).start)
    try:
        yield proc
    finally:
        proc.kill()


async def test_readyz_follows_inboxd_while_healthz_follows_the_process(
    inboxd_process: ServerProcess, migrated_url: str, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(routes_toml(inboxd_process.target))
    async with edge_process(config) as edge:
        assert await get_status(http, f"{edge.url}/healthz") == 200
        assert await get_status(http, f"{edge.url}/readyz") == 200
        inboxd_process.kill()
        await eventually(lambda: _is(get_status(http, f"{edge.url}/readyz"), 503))
        assert await get_status(http, f"{edge.url}/healthz") == 200
        again = ServerProcess(migrated_url, env={"INBOXD_LISTEN": inboxd_process.target})
        await asyncio.to_thread(again.start)
        try:
            await eventually(lambda: _is(get_status(http, f"{edge.url}/readyz"), 200), within=30)
        finally:
            again.kill()


async def _is(value: object, expected: object) -> bool:
    assert asyncio.iscoroutine(value)
    return bool(await value == expected)


async def test_metrics_count_a_signed_delivery_and_a_bad_signature_by_route(
    server: RunningServer, http: aiohttp.ClientSession, db: Database, tmp_path: Path
) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(routes_toml(f"127.0.0.1:{server.port}", extra=METRICS))
    async with edge_process(config) as edge:
        port = metrics_port(edge)
        status, acct = await deliver(http, f"{edge.url}/hooks/stripe")
        assert status == 200 and set(await stored_events(db, f"stripe/{acct}"))
        assert (await deliver(http, f"{edge.url}/hooks/stripe", tamper=True))[0] == 401
        samples = await scrape(http, port)
    route = ("route", "stripe")
    assert samples[("inboxd_edge_requests_total", (("outcome", "accepted"), route, ("status", "200")))] == 1
    assert samples[("inboxd_edge_requests_total", (("outcome", "unauthenticated"), route, ("status", "401")))] == 1
    assert samples[("inboxd_edge_signature_failures_total", (("reason", "mismatch"), route))] == 1
    assert samples[("inboxd_edge_forward_seconds_count", (route,))] == 1
    assert samples[("inboxd_edge_open_connections", ())] >= 0


async def test_sighup_applies_a_valid_routes_file_and_refuses_an_invalid_one(
    server: RunningServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    target = f"127.0.0.1:{server.port}"
    config = tmp_path / "edge.toml"
    config.write_text(routes_toml(target))
    async with edge_process(config) as edge:
        assert (await deliver(http, f"{edge.url}/hooks/stripe"))[0] == 200
        assert (await deliver(http, f"{edge.url}/hooks/stripe-eu", secret=SECOND_SECRET))[0] == 404
        # A valid file: the new route is served, without a restart (before: SIGHUP killed the edge).
        config.write_text(routes_toml(target, routes=(("stripe", "/hooks/stripe"), ("stripe-eu", "/hooks/stripe-eu"))))
        edge.proc.send_signal(signal.SIGHUP)
        await eventually(lambda: "reloaded: 2 routes" in edge.log())
        assert (await deliver(http, f"{edge.url}/hooks/stripe-eu", secret=SECOND_SECRET))[0] == 200
        # An invalid one (a misspelt key): refused in the log, the routes in force stay.
        config.write_text(routes_toml(target).replace("allowed_types", "allowed_typos"))
        edge.proc.send_signal(signal.SIGHUP)
        await eventually(lambda: "not reloaded" in edge.log())
        assert "allowed_typos" in edge.log()
        assert edge.proc.returncode is None
        assert (await deliver(http, f"{edge.url}/hooks/stripe"))[0] == 200
        assert (await deliver(http, f"{edge.url}/hooks/stripe-eu", secret=SECOND_SECRET))[0] == 200


async def test_log_format_json_writes_one_object_a_line(
    server: RunningServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(routes_toml(f"127.0.0.1:{server.port}", extra='\n[log]\nformat = "json"\n'))
    async with edge_process(config) as edge:
        assert (await deliver(http, f"{edge.url}/hooks/stripe"))[0] == 200
        await eventually(lambda: '"route"' in edge.log())
    lines = [json.loads(line) for line in edge.log().splitlines()]
    request = next(line for line in lines if line.get("route") == "stripe")
    assert {"ts", "level", "logger", "msg"} <= set(request)
    assert (request["status"], request["outcome"], request["type"]) == ("200", "accepted", "payment_intent.succeeded")


async def test_two_workers_serve_one_port_and_one_metrics_endpoint_counts_both(
    server: RunningServer, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    config = tmp_path / "edge.toml"
    config.write_text(routes_toml(f"127.0.0.1:{server.port}", extra=METRICS))
    async with edge_process(config, "--workers", "2") as edge:
        children = await _children(edge.proc.pid)
        assert len(children) == 2, children
        # A connection of its own per delivery, so the kernel can hand each to either process.
        connector_free = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))
        async with connector_free as fresh:
            statuses = [(await deliver(fresh, f"{edge.url}/hooks/stripe"))[0] for _ in range(20)]
        assert statuses == [200] * 20
        samples = await scrape(http, metrics_port(edge))
        accepted = (("outcome", "accepted"), ("route", "stripe"), ("status", "200"))
        assert samples[("inboxd_edge_requests_total", accepted)] == 20
        # SIGHUP to the parent reloads every worker.
        edge.proc.send_signal(signal.SIGHUP)
        await eventually(lambda: edge.log().count("reloaded: 1 routes") == 2)
        assert edge.proc.returncode is None


async def _children(pid: int) -> list[int]:
    proc = await asyncio.create_subprocess_exec("pgrep", "-P", str(pid), stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    return [int(p) for p in out.split()]
