"""`inboxd serve --workers 2`: two server processes on one port, one parent that keeps them.

Each server process answers health checks for `inboxd.worker.<index>` (and
only its own), so a test knows which process a channel's connection reached.
The kernel spreads connections, not calls: channels with distinct options get
connections of their own, and a few of them land on both processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import eventually
from tests.integration.helpers import accept_request, seconds
from tests.integration.procs import Serve, embedded_env, postgres_running, stop_stray_postgres, stored_keys

WORKERS = 2
LONG_WAIT = 50.0
SERVING = re.compile(r"^server process (\d+) serving \(pid (\d+)\)$")
METRICS_ON = re.compile(r"^metrics on http://[^:]+:(\d+)/metrics$")


def log_messages(serve: Serve) -> list[str]:
    """The `msg` of every JSON log line the parent and its children wrote so far."""
    messages = []
    for line in serve.log_path.read_text(encoding="utf-8").splitlines():
        try:
            messages.append(str(json.loads(line)["msg"]))
        except (ValueError, KeyError, TypeError):
            continue  # a traceback or other non-JSON output
    return messages


def worker_pids(serve: Serve) -> dict[int, int]:
    """Server process index -> the pid that most recently reported serving."""
    pids: dict[int, int] = {}
    for msg in log_messages(serve):
        if match := SERVING.match(msg):
            pids[int(match.group(1))] = int(match.group(2))
    return pids


def metrics_port(serve: Serve) -> int:
    for msg in log_messages(serve):
        if match := METRICS_ON.match(msg):
            return int(match.group(1))
    raise AssertionError(f"no metrics line in the log\n{serve.log_tail()}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent to read its exit code.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def serving_index(channel: grpc.aio.Channel) -> int | None:
    """Which server process this channel's connection reached (None: none answered)."""
    health = health_pb2_grpc.HealthStub(channel)
    for index in range(WORKERS):
        try:
            answer = await health.Check(health_pb2.HealthCheckRequest(service=f"inboxd.worker.{index}"), timeout=5)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                continue
            raise
        if answer.status == health_pb2.HealthCheckResponse.SERVING:
            return index
    return None


class Channels:
    """Channels to one target, each on a connection of its own (distinct options), closed together."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.opened: list[grpc.aio.Channel] = []

    async def on_worker(self, index: int, attempts: int = 64) -> grpc.aio.Channel:
        """A channel whose connection reached server process `index`."""
        for _ in range(attempts):
            channel = grpc.aio.insecure_channel(self.target, options=[("inboxd.test.channel", len(self.opened))])
            self.opened.append(channel)
            if await serving_index(channel) == index:
                return channel
        raise AssertionError(f"no connection out of {attempts} reached server process {index}")

    async def close(self) -> None:
        for channel in self.opened:
            await channel.close(None)


@pytest.fixture(scope="module")
def instance_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="inboxd-workers-"))
    os.chmod(folder, 0o755)  # the postgres user must reach the embedded cluster when root runs the tests
    try:
        yield folder
    finally:
        stop_stray_postgres(folder / "postgres")
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def serving_workers(folder: Path, migrated_url: str, **env: str) -> AsyncIterator[Serve]:
    """`inboxd serve --workers 2` on the embedded setup in `folder`, with `env`; stopped with every child."""
    environment = embedded_env(folder, DATABASE_URL=migrated_url, INBOXD_WORKERS=str(WORKERS), **env)
    serve = Serve(environment, folder / "inboxd.log", cwd=folder)
    await asyncio.to_thread(serve.start)
    try:
        yield serve
    finally:
        if serve.proc is not None and serve.proc.poll() is None:
            serve.proc.terminate()
            await asyncio.to_thread(serve.proc.wait, 60)
        serve.kill()
        for pid in worker_pids(serve).values():
            if pid_alive(pid):
                os.kill(pid, 9)


@pytest.fixture(scope="module")
async def two_workers(migrated_url: str, instance_dir: Path) -> AsyncIterator[Serve]:
    async with serving_workers(
        instance_dir,
        migrated_url,
        INBOXD_METRICS_LISTEN="127.0.0.1:0",
        # No fallback poll: a waiting Claim that gets an event was woken by a signal.
        INBOXD_FALLBACK_POLL="1h",
        # A second waiting Claim of the same caller is refused while the first waits: the probe below.
        INBOXD_MAX_WAITING_CLAIMS_PER_CALLER="1",
    ) as serve:
        yield serve


@pytest.fixture
async def channels(two_workers: Serve) -> AsyncIterator[Channels]:
    opened = Channels(two_workers.target)
    yield opened
    await opened.close()


async def start_waiting_claim(stub: InboxServiceStub, ns: str, wait: float) -> Any:
    """A Claim that is known to be waiting in the server process `stub` reaches.

    Each caller may hold one waiting Claim per process here, so a probing
    Claim refused RESOURCE_EXHAUSTED proves ours holds that slot. A probe that
    came first takes the slot for a moment and ours is refused: then we claim again.
    """
    request = inbox_pb2.ClaimRequest(namespaces=[ns], wait=seconds(wait))
    probe = inbox_pb2.ClaimRequest(namespaces=["probe/never-used"], wait=seconds(0.05))
    for _ in range(100):
        call = stub.Claim(request, timeout=wait + 10)
        while not call.done():
            try:
                await stub.Claim(probe, timeout=10)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    return call
                raise
        if (await call.code()) != grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise AssertionError(f"the Claim ended before it was seen waiting: {await call.code()}")
    raise AssertionError("the Claim was never seen waiting")


async def test_a_claim_waiting_in_one_process_is_woken_by_an_accept_served_by_another(
    channels: Channels, ns: str
) -> None:
    waiting = InboxServiceStub(await channels.on_worker(0))
    accepting = InboxServiceStub(await channels.on_worker(1))
    call = await start_waiting_claim(waiting, ns, LONG_WAIT)
    await accepting.Accept(accept_request(ns, "from-the-other-process"))
    # With the fallback poll off, only a signal from process 1 can end the wait before LONG_WAIT.
    answer = await asyncio.wait_for(call, LONG_WAIT / 2)
    assert [event.event_key for event in answer.events] == ["from-the-other-process"]


async def test_a_killed_process_loses_no_acknowledged_accept_and_the_parent_brings_it_back(
    two_workers: Serve, channels: Channels, db: Database, ns: str
) -> None:
    victim = InboxServiceStub(await channels.on_worker(1))
    old_pid = worker_pids(two_workers)[1]
    acknowledged: set[str] = set()
    stop = asyncio.Event()

    async def accept_until_refused(caller: int) -> None:
        n = 0
        while not stop.is_set():
            key = f"c{caller}-{n}"
            n += 1
            try:
                await victim.Accept(accept_request(ns, key), timeout=10)
            except grpc.aio.AioRpcError:
                return
            acknowledged.add(key)

    callers = [asyncio.create_task(accept_until_refused(c)) for c in range(8)]
    await eventually(lambda: len(acknowledged) >= 50, "some Accepts acknowledged before the kill")
    os.kill(old_pid, 9)
    # A call in flight at the kill is refused and its caller stops; a caller
    # between two calls at that moment reconnects to the shared port and goes
    # on with process 0 (so it would never stop on its own): a bounded while
    # for the refusals, then all stop.
    await asyncio.wait(callers, timeout=2)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*callers), 30)
    assert acknowledged <= await stored_keys(db, ns), "an acknowledged Accept is missing"

    await eventually(
        lambda: worker_pids(two_workers).get(1, old_pid) != old_pid,
        lambda: f"the parent to restart server process 1\n{two_workers.log_tail()}",
        within=60,
    )
    assert any(msg.startswith("server process 1 (pid ") and "SIGKILL" in msg for msg in log_messages(two_workers))
    back = InboxServiceStub(await channels.on_worker(1))
    answer = await back.Accept(accept_request(ns, "after-the-restart"))
    assert answer.outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
    assert two_workers.proc is not None and two_workers.proc.poll() is None, "the parent itself died"


async def http_get_metrics(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200"), head
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


async def test_one_metrics_endpoint_counts_the_accepts_of_every_process(
    two_workers: Serve, channels: Channels, ns: str
) -> None:
    port = metrics_port(two_workers)
    accepted = ("inboxd_accepts_total", frozenset({("outcome", "accepted")}))
    before = (await http_get_metrics(port)).get(accepted, 0.0)
    for index, count in ((0, 3), (1, 4)):
        stub = InboxServiceStub(await channels.on_worker(index))
        for n in range(count):
            await stub.Accept(accept_request(ns, f"w{index}-{n}"))
    after = await http_get_metrics(port)
    assert after.get(accepted, 0.0) - before == 7
    # The parent's own figures are there once: the health gauges and retention's counters.
    assert after[("inboxd_stats_refreshed_timestamp_seconds", frozenset())] > 0
    assert ("inboxd_retention_rows_deleted_total", frozenset()) in after


async def test_sigterm_drains_every_process_and_then_stops_the_embedded_postgres(tmp_path: Path, ns: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="inboxd-workers-embedded-"))
    os.chmod(folder, 0o755)
    env = embedded_env(folder, INBOXD_WORKERS=str(WORKERS), INBOXD_MAX_WAITING_CLAIMS_PER_CALLER="1")
    serve = Serve(env, tmp_path / "inboxd.log", cwd=folder)
    try:
        await asyncio.to_thread(serve.start)
        pids = worker_pids(serve)
        assert sorted(pids) == list(range(WORKERS))
        channels = Channels(serve.target)
        try:
            stubs = [InboxServiceStub(await channels.on_worker(index)) for index in range(WORKERS)]
            # One Claim in flight in each process when SIGTERM arrives: each must finish, not be cut off.
            claims = [await start_waiting_claim(stub, ns, 5.0) for stub in stubs]
            assert serve.proc is not None
            serve.proc.terminate()
            answers = await asyncio.gather(*claims)
            assert [len(answer.events) for answer in answers] == [0] * WORKERS
        finally:
            await channels.close()
        code = await asyncio.to_thread(serve.proc.wait, 60)
        assert code == 0, serve.log_tail()
        assert not any(pid_alive(pid) for pid in pids.values()), "a server process outlived its parent"
        assert not await asyncio.to_thread(postgres_running, folder / "postgres"), "PostgreSQL left running"
        assert not any("died" in msg for msg in log_messages(serve)), serve.log_tail()
    finally:
        serve.kill()
        await asyncio.to_thread(stop_stray_postgres, folder / "postgres")
        shutil.rmtree(folder, ignore_errors=True)
