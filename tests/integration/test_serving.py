"""Serving: gRPC health, server reflection, a schema-less client (buf curl), and `inboxd serve` on its
embedded PostgreSQL when no DATABASE_URL is given.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from google.protobuf.descriptor_pb2 import FileDescriptorProto
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from inboxd.config.tokens import Scope, entry_toml, new_token
from inboxd.serving.server import RunningServer
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import REPO, ServerProcess
from tests.integration.helpers import accept_request, expect_status
from tests.integration.procs import Serve, embedded_env, postgres_running, stop_stray_postgres

ACCEPTED = inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
DUPLICATE = inbox_pb2.ACCEPT_OUTCOME_DUPLICATE
INBOX_SERVICE = "inboxd.v1.InboxService"
ADMIN_SERVICE = "inboxd.v1.InboxAdminService"
CALL_DEADLINE = 30.0


@pytest.mark.parametrize("service", ["", INBOX_SERVICE, ADMIN_SERVICE])
async def test_health_reports_serving_once_the_database_is_reachable(channel: grpc.aio.Channel, service: str) -> None:
    answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_health_does_not_know_services_inboxd_does_not_serve(channel: grpc.aio.Channel) -> None:
    call = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
    await expect_status(call, grpc.StatusCode.NOT_FOUND)


async def _reflect(channel: grpc.aio.Channel, request: Any) -> Any:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    answers = [answer async for answer in stub.ServerReflectionInfo(iter([request]))]
    assert len(answers) == 1
    return answers[0]


async def test_reflection_lists_both_inboxd_services(channel: grpc.aio.Channel) -> None:
    answer = await _reflect(channel, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = {service.name for service in answer.list_services_response.service}
    assert {INBOX_SERVICE, ADMIN_SERVICE} <= names


async def test_reflection_serves_the_inbox_service_descriptor_with_its_accept_methods(
    channel: grpc.aio.Channel,
) -> None:
    # What a schema-less client asks for first: the file that defines the service.
    request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=INBOX_SERVICE)
    answer = await _reflect(channel, request)
    assert answer.WhichOneof("message_response") == "file_descriptor_response", answer
    files = [FileDescriptorProto.FromString(raw) for raw in answer.file_descriptor_response.file_descriptor_proto]
    [inbox_file] = [f for f in files if f.package == "inboxd.v1" and any(s.name == "InboxService" for s in f.service)]
    [service] = [s for s in inbox_file.service if s.name == "InboxService"]
    methods = {m.name: (m.input_type, m.output_type) for m in service.method}
    assert methods["Accept"] == (".inboxd.v1.AcceptRequest", ".inboxd.v1.AcceptResponse")
    assert methods["AcceptBatch"] == (".inboxd.v1.AcceptBatchRequest", ".inboxd.v1.AcceptBatchResponse")


def _buf_curl(port: int, method: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "npx",
            "--no-install",
            "buf",
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            f"http://127.0.0.1:{port}/{INBOX_SERVICE}/{method}",
            "-d",
            json.dumps(body),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_buf_curl_with_reflection_and_no_schema_accepts_and_then_sees_a_duplicate(
    server: RunningServer, ns: str
) -> None:
    body = {
        "namespace": ns,
        "eventKey": "curl-1",
        "eventType": "test.event",
        "payload": base64.b64encode(b'{"id": "curl-1"}').decode(),
        "metadata": {"delivery_id": "d1"},
    }
    # buf curl blocks; the server answers from this very event loop, so it runs in a thread.
    first = await asyncio.to_thread(_buf_curl, server.port, "Accept", body)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["outcome"] == "ACCEPT_OUTCOME_ACCEPTED"
    second = await asyncio.to_thread(_buf_curl, server.port, "Accept", {**body, "metadata": {"delivery_id": "d2"}})
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["outcome"] == "ACCEPT_OUTCOME_DUPLICATE"


async def test_buf_curl_sees_invalid_argument_for_a_bad_request(server: RunningServer, ns: str) -> None:
    body = {"namespace": ns, "eventKey": "", "eventType": "test.event", "payload": base64.b64encode(b"{}").decode()}
    answer = await asyncio.to_thread(_buf_curl, server.port, "Accept", body)
    assert answer.returncode != 0
    assert "invalid_argument" in answer.stderr.lower(), answer.stderr
    assert "event_key" in answer.stderr, answer.stderr


@pytest.fixture
async def fresh_data_dir() -> AsyncIterator[Path]:
    """A new folder under /tmp for INBOXD_DATA_DIR, reachable by the `postgres` user."""
    folder = Path(tempfile.mkdtemp(prefix="inboxd-test-embedded-", dir="/tmp"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        await asyncio.to_thread(stop_stray_postgres, folder / "postgres")
        shutil.rmtree(folder, ignore_errors=True)


async def _accept_once(target: str, ns: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        answer = await InboxServiceStub(channel).Accept(accept_request(ns, "kept"), timeout=CALL_DEADLINE)
        return int(answer.outcome)


async def test_serve_without_database_url_runs_embedded_postgres_stops_it_on_sigterm_and_keeps_events(
    fresh_data_dir: Path, tmp_path: Path, ns: str
) -> None:
    env = embedded_env(fresh_data_dir)
    assert "DATABASE_URL" not in env
    cluster = fresh_data_dir / "postgres"

    for run, expected in ((1, ACCEPTED), (2, DUPLICATE)):
        serve = Serve(env, tmp_path / f"inboxd-{run}.log", cwd=tmp_path)
        await asyncio.to_thread(serve.start)
        try:
            # The readiness line names the bound port, not the configured :0.
            assert serve.host == "127.0.0.1"
            assert serve.port > 0
            assert (cluster / "PG_VERSION").exists(), "the embedded cluster is not in INBOXD_DATA_DIR/postgres"
            assert await _accept_once(serve.target, ns) == expected, f"run {run}"
            assert await asyncio.to_thread(_cluster_sessions, cluster) == {"inboxd"}, "inboxd's own role only"
            assert f"database: embedded PostgreSQL in {cluster.resolve()}" in serve.log_tail(200)
            code = await asyncio.to_thread(serve.terminate)
            assert code == 0, f"run {run}: exit {code}\n{serve.log_tail()}"
            assert "embedded PostgreSQL in" in serve.log_tail(5) and "stopped" in serve.log_tail(5)
        finally:
            serve.kill()
        assert not (cluster / "postmaster.pid").exists(), f"run {run}: PostgreSQL left running\n{serve.log_tail()}"
        assert not await asyncio.to_thread(postgres_running, cluster)


def _cluster_sessions(cluster: Path) -> set[str]:
    """Who inboxd's sessions are, read as the superuser over the cluster's own socket; TCP must be refused."""
    port = int((cluster / "postmaster.pid").read_text().splitlines()[3])
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "the embedded cluster listens on 127.0.0.1"
    url = f"host={cluster} port={port} user=postgres dbname=postgres passfile={cluster / 'inboxd.pgpass'}"
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = 'inboxd' AND pid <> pg_backend_pid()"
        ).fetchall()
    return {str(r[0]) for r in rows}


def _start_then_terminate_at_once(database_url: str) -> int:
    server = ServerProcess(database_url=database_url)
    try:
        server.start()
        return server.terminate()
    finally:
        server.kill()


async def test_serve_exits_cleanly_on_a_sigterm_sent_right_after_its_readiness_line(migrated_url: str) -> None:
    # A supervisor may stop inboxd the moment it reports ready; SIGTERM must then be a clean shutdown
    # (exit 0, in-flight calls drained, embedded PostgreSQL stopped), never the default signal death.
    codes = [await asyncio.to_thread(_start_then_terminate_at_once, migrated_url) for _ in range(5)]
    assert codes == [0] * 5, f"exit codes {codes}: -15 means SIGTERM killed inboxd before it handled the signal"


async def test_a_production_shaped_server_runs_embedded_only_when_asked(fresh_data_dir: Path, tmp_path: Path) -> None:
    """INBOXD_EMBEDDED=1: a tokens file and still the embedded database, on purpose."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]))
    env = embedded_env(fresh_data_dir, INBOXD_TOKENS_FILE=str(tokens), INBOXD_EMBEDDED="1")
    serve = Serve(env, tmp_path / "inboxd.log", cwd=tmp_path)
    await asyncio.to_thread(serve.start)
    try:
        assert "database: embedded PostgreSQL in" in serve.log_tail(200)
        assert await asyncio.to_thread(serve.terminate) == 0
    finally:
        serve.kill()
