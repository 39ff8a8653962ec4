"""One trace from a provider's delivery to a worker's action, across the edge, inboxd and a worker (issue 31).

Four real processes and a real OTLP/gRPC receiver (tests/tracing_support):
`inboxd-edge` from a routes file, `inboxd serve` on the session's database,
and a worker (the Python runtime, then the Node one), each exporting its
spans with its OpenTelemetry SDK, configured by nothing but OTEL_*
variables. A signed Stripe delivery goes in at the edge; the trace it starts
must hold the edge's request span, inboxd's Accept span under it, the span of
the Claim or Work push that handed the event out, the worker's handler span
and, under that, its action span.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import pytest

from tests.edge.rig import STRIPE_NEW_SECRET, as_body, post, sign_stripe
from tests.edge.test_edge_cli import ROUTES_TOML
from tests.harness import REPO
from tests.integration.procs import Serve, embedded_env
from tests.tracing_support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

# A provider that traces (Stripe does not, but a proxy in front of the edge may): its span is the trace's root.
PROVIDER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PROVIDER_SPAN = "00f067aa0ba902b7"
WITHIN = 60.0


def otel_env(receiver: OtlpReceiver, service: str) -> dict[str, str]:
    """What turns an inboxd process's tracing on, exporting everything to `receiver` at once."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_SERVICE_NAME": service,
        # Exported within 100 ms, not the default 5 s: the test waits for them.
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


@contextlib.asynccontextmanager
async def inboxd_serving(folder: Path, migrated_url: str, receiver: OtlpReceiver) -> AsyncIterator[Serve]:
    env = embedded_env(folder, DATABASE_URL=migrated_url, **otel_env(receiver, "inboxd"))
    serve = Serve(env, folder / "inboxd.log", cwd=folder)
    await asyncio.to_thread(serve.start)
    try:
        yield serve
    finally:
        if serve.proc is not None and serve.proc.poll() is None:
            serve.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(serve.proc.wait, 60)
        serve.kill()


@contextlib.asynccontextmanager
async def edge_serving(folder: Path, target: str, receiver: OtlpReceiver) -> AsyncIterator[str]:
    """`python -m inboxd_edge` on a Stripe route; yields its base URL."""
    config = folder / "edge.toml"
    config.write_text(ROUTES_TOML.format(target=target))
    env = {**os.environ, "STRIPE_WEBHOOK_SECRET": STRIPE_NEW_SECRET, **otel_env(receiver, "inboxd-edge")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "inboxd_edge", "--config", str(config), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=(folder / "edge.log").open("wb"),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("inboxd-edge listening on "), line + (folder / "edge.log").read_text()
        yield "http://" + line.rsplit(" ", 1)[1].strip()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def run_worker(command: Sequence[str], env: dict[str, str], folder: Path, name: str) -> None:
    """A worker process that handles one event and stops (flushing its spans); fails the test on its failure."""
    log = folder / f"{name}.log"
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *command, env={**os.environ, **env}, cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=err
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), WITHIN)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"{name} did not finish within {WITHIN} s:\n{log.read_text()[-3000:]}") from None
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
    assert b"handled 1" in out, out


def one(spans: Sequence[ReceivedSpan], what: str) -> ReceivedSpan:
    assert len(spans) == 1, f"{what}: {len(spans)} spans: {[(s.service_name, s.name) for s in spans]}"
    return spans[0]


def the_joined_trace(spans: list[ReceivedSpan], account: str, worker: str) -> dict[str, ReceivedSpan]:
    """The five spans of the delivery's trace, each checked against its parent; AssertionError if any is missing."""
    ours = f"stripe/{account}"
    edge = one([s for s in spans if s.service_name == "inboxd-edge" and s.kind == "SERVER"
                and s.attributes.get("messaging.destination.name") == ours], "the edge's request span")  # fmt: skip
    trace = [s for s in spans if s.trace_id == edge.trace_id]
    accept = one([s for s in trace if s.service_name == "inboxd" and s.parent_span_id == edge.span_id
                  and s.attributes.get("messaging.operation.name") == "accept"], "inboxd's Accept span")  # fmt: skip
    handed = one([s for s in trace if s.service_name == "inboxd" and s.name == "receive"], "the hand-out span")
    process = one([s for s in trace if s.service_name == worker and s.name == "process"], "the handler's span")
    action = one([s for s in trace if s.service_name == worker and s.name == "action"], "the action's span")
    return {"edge": edge, "accept": accept, "handed": handed, "process": process, "action": action}


def check_trace(found: dict[str, ReceivedSpan], account: str) -> None:
    edge, accept, handed, process, action = (found[k] for k in ("edge", "accept", "handed", "process", "action"))
    # The provider's span is the root; the edge continues it.
    assert (edge.trace_id, edge.parent_span_id) == (PROVIDER_TRACE, PROVIDER_SPAN)
    assert accept.attributes["messaging.system"] == "inboxd"
    assert accept.attributes["inboxd.accept.outcome"] == "accepted"
    # The stored context is the edge's: the hand-out and the handler both start from it, minutes later maybe.
    assert handed.parent_span_id == edge.span_id and handed.kind == "CONSUMER"
    assert process.parent_span_id == edge.span_id and process.kind == "CONSUMER"
    assert process.attributes["inboxd.trace.parent"] == "child"
    assert process.attributes["messaging.destination.name"] == f"stripe/{account}"
    assert action.parent_span_id == process.span_id
    assert action.attributes["inboxd.action.name"] == "send-receipt:v1"
    assert action.attributes["inboxd.action.outcome"] == "SUCCEEDED"
    # One message id for the event, in every process, and never the raw key (the Stripe event id).
    refs = {s.attributes.get("messaging.message.id") for s in found.values()}
    assert len(refs) == 1 and None not in refs, refs
    for span in found.values():
        assert not any("evt_" in str(value) for value in span.attributes.values()), span


async def deliver(http: aiohttp.ClientSession, edge_url: str, account: str, event_id: str) -> None:
    body = as_body({"id": event_id, "type": "payment_intent.succeeded", "account": account})
    headers = {**sign_stripe(body, STRIPE_NEW_SECRET), "traceparent": f"00-{PROVIDER_TRACE}-{PROVIDER_SPAN}-01"}
    reply = await post(http, f"{edge_url}/hooks/stripe", body, headers)
    assert (reply.status, reply.outcome) == (200, "accepted"), reply


@pytest.fixture
async def running(tmp_path: Path, migrated_url: str) -> AsyncIterator[tuple[OtlpReceiver, str, str]]:
    """The receiver, inboxd and the edge, each tracing to the receiver: (receiver, inboxd's target, the edge's URL)."""
    async with otlp_receiver() as receiver:
        async with inboxd_serving(tmp_path, migrated_url, receiver) as serve:
            async with edge_serving(tmp_path, serve.target, receiver) as edge_url:
                yield receiver, serve.target, edge_url


async def traced_through(
    running: tuple[OtlpReceiver, str, str], folder: Path, worker: str, command: Sequence[str]
) -> None:
    """One delivery at the edge, handled by the worker `command` (given the target, its namespace, 1): one trace."""
    receiver, target, edge_url = running
    account = f"acct_{uuid.uuid4().hex[:8]}"
    async with aiohttp.ClientSession() as http:
        await deliver(http, edge_url, account, f"evt_e2e_{worker}")
    await run_worker([*command, target, f"stripe/{account}", "1"], otel_env(receiver, worker), folder, worker)

    def joined(spans: list[ReceivedSpan]) -> bool:
        try:
            the_joined_trace(spans, account, worker)
        except AssertionError:
            return False
        return True

    spans = await receiver.wait_for(joined, WITHIN, f"the delivery's trace through {worker}")
    check_trace(the_joined_trace(spans, account, worker), account)


async def test_one_trace_joins_the_edge_inboxd_and_the_python_workers_handler_and_action(
    running: tuple[OtlpReceiver, str, str], tmp_path: Path
) -> None:
    await traced_through(running, tmp_path, "e2e-python-worker", [sys.executable, "-m", "tests.tracing_e2e.py_worker"])


async def test_one_trace_joins_the_edge_inboxd_and_the_node_workers_handler_and_action(
    running: tuple[OtlpReceiver, str, str], tmp_path: Path
) -> None:
    node = shutil.which("node")
    assert node is not None, "node is not on PATH: the Node worker needs Node 20+"
    script = str(REPO / "tests" / "tracing_e2e" / "node_worker.mjs")
    await traced_through(running, tmp_path, "e2e-node-worker", [node, script])


async def test_a_redelivery_is_a_new_trace_whose_accept_links_to_the_first(
    running: tuple[OtlpReceiver, str, str],
) -> None:
    receiver, _target, edge_url = running
    account = f"acct_{uuid.uuid4().hex[:8]}"
    body = as_body({"id": "evt_e2e_again", "type": "payment_intent.succeeded", "account": account})
    first, second = (f"{i}" * 32 for i in (1, 2))
    async with aiohttp.ClientSession() as http:
        for trace, outcome in ((first, "accepted"), (second, "duplicate")):
            headers = {**sign_stripe(body, STRIPE_NEW_SECRET), "traceparent": f"00-{trace}-{PROVIDER_SPAN}-01"}
            reply = await post(http, f"{edge_url}/hooks/stripe", body, headers)
            assert (reply.status, reply.outcome) == (200, outcome)

    def repeat_accept(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
        return [s for s in spans if s.service_name == "inboxd" and s.trace_id == second
                and s.attributes.get("inboxd.accept.outcome") == "duplicate"]  # fmt: skip

    spans = await receiver.wait_for(lambda s: bool(repeat_accept(s)), WITHIN, "the repeat's Accept span")
    [repeat] = repeat_accept(spans)
    assert repeat.links_to(first), repeat.links
