"""Only who belongs gets in: scoped bearer tokens, namespaces, TLS and mutual TLS."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, entry_toml, new_token
from inboxd.serving.server import MAX_BATCH_TOTAL_BYTES, RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.conftest import NO_RESCUER
from tests.harness import ServerProcess
from tests.integration.certs import Certs, make_certs
from tests.integration.helpers import accept_request, seconds

A, B = "tenant-a/acct", "tenant-b/acct"


@dataclass(frozen=True)
class Tokens:
    edge_a: str
    worker_a: str
    worker_b: str
    admin_a: str
    root: str
    file: Path


def write_tokens(path: Path) -> Tokens:
    grants = {
        "edge-a": ([Scope.ACCEPT], ["tenant-a/*"]),
        "worker-a": ([Scope.WORK], ["tenant-a/*"]),
        "worker-b": ([Scope.WORK], ["tenant-b/*"]),
        "admin-a": ([Scope.ADMIN], ["tenant-a/*"]),
        "root": (list(Scope), ["*"]),
    }
    tokens = {name: new_token() for name in grants}
    path.write_text("\n".join(entry_toml(n, tokens[n], *grants[n]) for n in grants))
    return Tokens(tokens["edge-a"], tokens["worker-a"], tokens["worker-b"], tokens["admin-a"], tokens["root"], path)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> Tokens:
    return write_tokens(tmp_path_factory.mktemp("tokens") / "tokens.toml")


@pytest.fixture(scope="module")
async def guarded(db: Database, tokens: Tokens) -> AsyncIterator[RunningServer]:
    from inboxd.config.tokens import TokenRegistry

    settings = Settings(
        listen="127.0.0.1:0", tokens_file=tokens.file, max_waiting_claims_per_caller=2, rescue_interval=NO_RESCUER
    )
    running = await start_server(settings, db, registry=TokenRegistry(tokens.file))
    yield running
    await running.stop(1.0)


@pytest.fixture(scope="module")
async def chan(guarded: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{guarded.port}") as channel:
        yield channel


def bearer(token: str | None) -> list[tuple[str, str]]:
    return [] if token is None else [("authorization", f"Bearer {token}")]


# Every RPC, with a request that touches namespace `ns`.
Call = Callable[[grpc.aio.Channel, str, list[tuple[str, str]]], Any]


def _fence(ns: str) -> dict[str, Any]:
    return {"namespace": ns, "event_key": "guess", "claim_token": "t"}


RPCS: dict[str, tuple[str, Call]] = {
    "Accept": ("edge", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).Accept(
        accept_request(ns, "k"), metadata=md)),
    "AcceptBatch": ("edge", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).AcceptBatch(
        inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, "k1")]), metadata=md)),
    "Claim": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).Claim(
        inbox_pb2.ClaimRequest(namespaces=[ns]), metadata=md)),
    "RenewLease": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).RenewLease(
        inbox_pb2.RenewLeaseRequest(**_fence(ns)), metadata=md)),
    "Complete": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).Complete(
        inbox_pb2.CompleteRequest(**_fence(ns)), metadata=md)),
    "Fail": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).Fail(
        inbox_pb2.FailRequest(**_fence(ns)), metadata=md)),
    "Release": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).Release(
        inbox_pb2.ReleaseRequest(**_fence(ns)), metadata=md)),
    "RecordActionOutcome": ("worker", lambda c, ns, md: inbox_pb2_grpc.InboxServiceStub(c).RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(
            **_fence(ns), action="a", state=types_pb2.ACTION_STATE_SUCCEEDED), metadata=md)),
    "GetEvent": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).GetEvent(
        admin_pb2.GetEventRequest(namespace=ns, event_key="guess"), metadata=md)),
    "ListEvents": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).ListEvents(
        admin_pb2.ListEventsRequest(namespace=ns), metadata=md)),
    "Replay": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).Replay(
        admin_pb2.ReplayRequest(namespace=ns, event_key="guess", reason="test"), metadata=md)),
    "Stats": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).Stats(
        admin_pb2.StatsRequest(namespace=ns), metadata=md)),
    "SettleAction": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).SettleAction(
        admin_pb2.SettleActionRequest(
            namespace=ns, event_key="guess", action="a", outcome=types_pb2.ACTION_STATE_SUCCEEDED, reason="test",
            expected_state=types_pb2.ACTION_STATE_UNKNOWN, expected_fencing_token=1), metadata=md)),
    "EndClaim": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).EndClaim(
        admin_pb2.EndClaimRequest(namespace=ns, event_key="guess", expected_fencing_token=1, reason="test"),
        metadata=md)),
    "Discard": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).Discard(
        admin_pb2.DiscardRequest(
            namespace=ns, event_key="guess", expected_state=types_pb2.EVENT_STATE_PENDING, reason="test"),
        metadata=md)),
    # Removing a rule that does not exist: NOT_FOUND once through, and no rule left behind in the shared database.
    "SetFlowControl": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).SetFlowControl(
        admin_pb2.SetFlowControlRequest(pattern=ns, remove=True, reason="test"), metadata=md)),
    "GetFlowControl": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).GetFlowControl(
        admin_pb2.GetFlowControlRequest(namespace=ns), metadata=md)),
    # A dry run: counted, stored ended, nothing left for a runner.
    "StartBulkOperation": ("admin", lambda c, ns, md: admin_pb2_grpc.InboxAdminServiceStub(c).StartBulkOperation(
        admin_pb2.StartBulkOperationRequest(
            filter=admin_pb2.BulkFilter(namespace_pattern=ns), action=admin_pb2.BULK_ACTION_REPLAY, reason="test",
            dry_run=True), metadata=md)),
}  # fmt: skip


NOT_FOUND = grpc.StatusCode.NOT_FOUND
CORRECT_TOKEN_ANSWER = {
    **{rpc: grpc.StatusCode.OK for rpc in ("Accept", "AcceptBatch", "Claim", "ListEvents", "Stats", "GetFlowControl")},
    "StartBulkOperation": grpc.StatusCode.OK,
    "SetFlowControl": NOT_FOUND,
    **{rpc: NOT_FOUND for rpc in ("RenewLease", "Complete", "Fail", "Release", "RecordActionOutcome")},
    **{rpc: NOT_FOUND for rpc in ("GetEvent", "Replay", "SettleAction", "EndClaim", "Discard")},
}


def right_token(tokens: Tokens, role: str) -> str:
    return {"edge": tokens.edge_a, "worker": tokens.worker_a, "admin": tokens.admin_a}[role]


def wrong_scope(tokens: Tokens, role: str) -> str:
    return {"edge": tokens.worker_a, "worker": tokens.edge_a, "admin": tokens.worker_a}[role]


async def code_of(call: Any) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("rpc", sorted(RPCS))
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no token", {grpc.StatusCode.UNAUTHENTICATED}),
        ("wrong token", {grpc.StatusCode.UNAUTHENTICATED}),
        ("wrong scope", {grpc.StatusCode.PERMISSION_DENIED}),
        ("foreign namespace", {grpc.StatusCode.PERMISSION_DENIED}),
        ("correct token", None),
    ],
)
async def test_the_access_matrix(
    chan: grpc.aio.Channel, tokens: Tokens, rpc: str, case: str, expected: set[grpc.StatusCode] | None
) -> None:
    role, call = RPCS[rpc]
    token, ns = {
        "no token": (None, A),
        "wrong token": ("ibx_not-a-real-token", A),
        "wrong scope": (wrong_scope(tokens, role), A),
        "foreign namespace": (right_token(tokens, role), B),
        "correct token": (right_token(tokens, role), A),
    }[case]
    code = await code_of(call(chan, ns, bearer(token)))
    # With the right token the call gets through: NOT_FOUND where it names an event that does not exist.
    expected = expected or {CORRECT_TOKEN_ANSWER[rpc]}
    assert code in expected, f"{rpc} with {case}: {code}"


async def test_a_claim_that_names_no_namespace_sees_only_the_callers_namespaces(
    chan: grpc.aio.Channel, tokens: Tokens, ns: str
) -> None:
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    mine, theirs = f"tenant-b/{ns}", f"tenant-a/{ns}"
    await stub.Accept(accept_request(theirs, "secret"), metadata=bearer(tokens.root))
    await stub.Accept(accept_request(mine, "own"), metadata=bearer(tokens.root))
    seen: list[str] = []
    while True:
        answer = await stub.Claim(inbox_pb2.ClaimRequest(max_events=100), metadata=bearer(tokens.worker_b))
        if not answer.events:
            break
        seen += [e.namespace for e in answer.events]
        for event in answer.events:
            await stub.Complete(
                inbox_pb2.CompleteRequest(
                    namespace=event.namespace, event_key=event.event_key, claim_token=event.claim_token
                ),
                metadata=bearer(tokens.worker_b),
            )
    assert mine in seen
    assert all(n.startswith("tenant-b/") for n in seen)


async def test_a_listing_that_names_no_namespace_shows_every_namespace_the_caller_may_see_and_no_other(
    chan: grpc.aio.Channel, tokens: Tokens, ns: str
) -> None:
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
    mine, also_mine, theirs = f"tenant-a/{ns}", f"tenant-a/{ns}/sub", f"tenant-b/{ns}"
    for namespace in (mine, also_mine, theirs):
        await stub.Accept(accept_request(namespace, "k"), metadata=bearer(tokens.root))
    listed: set[str] = set()
    token = ""
    while True:  # every page: the listing spans the whole table, other tests' events included
        page = await admin.ListEvents(
            admin_pb2.ListEventsRequest(page_size=1000, page_token=token), metadata=bearer(tokens.admin_a)
        )
        listed |= {e.namespace for e in page.events}
        token = page.next_page_token
        if not token:
            break
    assert {mine, also_mine} <= listed
    assert all(n.startswith("tenant-a/") for n in listed)
    everywhere = await admin.ListEvents(admin_pb2.ListEventsRequest(page_size=1000), metadata=bearer(tokens.root))
    assert theirs in {e.namespace for e in everywhere.events}


async def test_a_foreign_worker_cannot_touch_an_event_through_fenced_calls_with_a_guessed_key(
    chan: grpc.aio.Channel, tokens: Tokens, ns: str
) -> None:
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    theirs = f"tenant-a/{ns}"
    await stub.Accept(accept_request(theirs, "k"), metadata=bearer(tokens.edge_a))
    [event] = (await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[theirs]), metadata=bearer(tokens.worker_a))).events
    stolen = {"namespace": theirs, "event_key": "k", "claim_token": event.claim_token}
    for call in (
        stub.Complete(inbox_pb2.CompleteRequest(**stolen), metadata=bearer(tokens.worker_b)),
        stub.Release(inbox_pb2.ReleaseRequest(**stolen), metadata=bearer(tokens.worker_b)),
        stub.RecordActionOutcome(
            inbox_pb2.RecordActionOutcomeRequest(**stolen, action="a", state=types_pb2.ACTION_STATE_SUCCEEDED),
            metadata=bearer(tokens.worker_b),
        ),
    ):
        assert await code_of(call) == grpc.StatusCode.PERMISSION_DENIED
    await stub.Complete(inbox_pb2.CompleteRequest(**stolen), metadata=bearer(tokens.worker_a))


async def test_health_stays_open_and_reflection_takes_a_token_of_any_scope(
    chan: grpc.aio.Channel, tokens: Tokens
) -> None:
    # The server does guard its services: without a token, an inboxd call is refused...
    refused = inbox_pb2_grpc.InboxServiceStub(chan).Accept(accept_request("tenant-a/x", "k"))
    assert await code_of(refused) == grpc.StatusCode.UNAUTHENTICATED
    # ...while health answers the same tokenless caller (probes carry no token)...
    for service in ("", "inboxd.v1.InboxService", "inboxd.v1.InboxAdminService"):
        answer = await health_pb2_grpc.HealthStub(chan).Check(health_pb2.HealthCheckRequest(service=service))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
    reflect = reflection_pb2_grpc.ServerReflectionStub(chan)
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="inboxd.v1.InboxService"),
    ]
    # ...and reflection answers any valid token, of any scope, and refuses the tokenless one.
    assert await reflect.ServerReflectionInfo(iter(requests)).code() == grpc.StatusCode.UNAUTHENTICATED
    answers = [answer async for answer in reflect.ServerReflectionInfo(iter(requests), metadata=bearer(tokens.edge_a))]
    assert [a.WhichOneof("message_response") for a in answers] == [
        "list_services_response",
        "file_descriptor_response",
    ]
    names = {service.name for service in answers[0].list_services_response.service}
    assert {"inboxd.v1.InboxService", "inboxd.v1.InboxAdminService"} <= names
    assert answers[1].file_descriptor_response.file_descriptor_proto


async def test_a_tokenless_batch_beyond_the_size_limit_is_refused_on_its_metadata_not_held_for_the_token_check(
    chan: grpc.aio.Channel,
) -> None:
    # The token is judged before grpc reads the message (api.admission), so it is never held at all.
    filler = "x" * (900 * 1024)
    events = [
        accept_request("tenant-a/x", f"k{i}", {"fill": filler}) for i in range(MAX_BATCH_TOTAL_BYTES // len(filler) + 2)
    ]
    call = inbox_pb2_grpc.InboxServiceStub(chan).AcceptBatch(inbox_pb2.AcceptBatchRequest(events=events))
    assert await code_of(call) == grpc.StatusCode.UNAUTHENTICATED


async def test_one_caller_cannot_hold_more_than_its_share_of_waiting_claims(
    chan: grpc.aio.Channel, tokens: Tokens, ns: str
) -> None:
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    request = inbox_pb2.ClaimRequest(namespaces=[f"tenant-a/{ns}"], wait=seconds(5))
    held = [stub.Claim(request, metadata=bearer(tokens.worker_a), timeout=10) for _ in range(2)]
    await asyncio.sleep(0.3)  # let both become waiting claims
    try:
        assert await code_of(stub.Claim(request, metadata=bearer(tokens.worker_a))) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED
        )
    finally:
        for call in held:
            call.cancel()


# -- the tokens file at start-up and on SIGHUP --


def test_without_a_tokens_file_listening_beyond_loopback_is_refused(database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": database_url, "INBOXD_LISTEN": "0.0.0.0:0"}
    env.pop("INBOXD_TOKENS_FILE", None)
    done = subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "refusing to listen on 0.0.0.0:0 without a tokens file" in done.stderr


def test_a_broken_tokens_file_stops_start_up_with_its_reason(database_url: str, tmp_path: Path) -> None:
    broken = tmp_path / "tokens.toml"
    broken.write_text('[[token]]\nname = "x"\nsha256 = "nope"\nscopes = ["work"]\nnamespaces = ["*"]\n')
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "INBOXD_LISTEN": "127.0.0.1:0",
        "INBOXD_TOKENS_FILE": str(broken),
    }
    done = subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "'sha256' must be 64 lowercase hex digits" in done.stderr


async def test_the_tokens_file_is_reread_on_sighup(database_url: str, tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    first = new_token()
    file.write_text(entry_toml("first", first, [Scope.ACCEPT], ["*"]))
    server = await asyncio.to_thread(
        ServerProcess(database_url=database_url, env={"INBOXD_TOKENS_FILE": str(file)}).start
    )
    try:
        async with grpc.aio.insecure_channel(server.target) as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)
            second = new_token()
            assert await code_of(stub.Accept(accept_request("r/ns", "k"), metadata=bearer(second))) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
            file.write_text(entry_toml("second", second, [Scope.ACCEPT], ["*"]))
            assert server.proc is not None
            server.proc.send_signal(signal.SIGHUP)
            for _ in range(200):  # bounded: the reload is asynchronous to us
                if await code_of(stub.Accept(accept_request("r/ns", "k"), metadata=bearer(second))) == (
                    grpc.StatusCode.OK
                ):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the new token was not accepted after SIGHUP")
            assert await code_of(stub.Accept(accept_request("r/ns", "k"), metadata=bearer(first))) == (
                grpc.StatusCode.UNAUTHENTICATED
            )
    finally:
        server.kill()


# -- TLS --


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def _tls_server(db: Database, certs: Certs, *, mutual: bool) -> RunningServer:
    settings = Settings(
        listen="127.0.0.1:0",
        tls_cert=certs.server_cert,
        tls_key=certs.server_key,
        tls_client_ca=certs.ca if mutual else None,
        rescue_interval=NO_RESCUER,
    )
    return await start_server(settings, db)


async def _health_over(port: int, credentials: grpc.ChannelCredentials) -> grpc.StatusCode:
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
        return await code_of(health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5))


async def test_tls_connects_with_the_right_ca_and_refuses_the_wrong_one(db: Database, certs: Certs) -> None:
    server = await _tls_server(db, certs, mutual=False)
    try:
        good = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
        bad = grpc.ssl_channel_credentials(root_certificates=certs.other_ca.read_bytes())
        assert await _health_over(server.port, good) == grpc.StatusCode.OK
        assert await _health_over(server.port, bad) == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0.5)


async def test_mutual_tls_needs_a_client_certificate_from_the_trusted_ca(db: Database, certs: Certs) -> None:
    server = await _tls_server(db, certs, mutual=True)
    try:
        root = certs.ca.read_bytes()
        trusted = grpc.ssl_channel_credentials(root, certs.client_key.read_bytes(), certs.client_cert.read_bytes())
        stranger = grpc.ssl_channel_credentials(
            root, certs.other_client_key.read_bytes(), certs.other_client_cert.read_bytes()
        )
        anonymous = grpc.ssl_channel_credentials(root)
        assert await _health_over(server.port, trusted) == grpc.StatusCode.OK
        assert await _health_over(server.port, stranger) == grpc.StatusCode.UNAVAILABLE
        assert await _health_over(server.port, anonymous) == grpc.StatusCode.UNAVAILABLE
    finally:
        await server.stop(0.5)


async def test_a_batch_above_grpcs_default_4_mib_message_limit_is_accepted(
    inbox: inbox_pb2_grpc.InboxServiceStub, ns: str
) -> None:
    big = b'"' + b"x" * (1024 * 1024 - 16) + b'"'
    batch = inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, f"big-{i}", big) for i in range(6)])
    answer = await inbox.AcceptBatch(batch)
    assert len(answer.results) == 6


async def test_refused_calls_are_counted_in_the_rpc_metrics(chan: grpc.aio.Channel, guarded: RunningServer) -> None:
    assert guarded.ops is not None
    registry = guarded.ops.metrics.registry
    labels = {"method": "Accept", "code": "UNAUTHENTICATED"}
    before = registry.get_sample_value("inboxd_rpc_duration_seconds_count", labels) or 0.0
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    assert await code_of(stub.Accept(accept_request(A, "k"))) == grpc.StatusCode.UNAUTHENTICATED
    assert registry.get_sample_value("inboxd_rpc_duration_seconds_count", labels) == before + 1


async def test_replays_audit_row_names_the_calling_token(
    chan: grpc.aio.Channel, tokens: Tokens, db: Database, ns: str
) -> None:
    space = f"tenant-a/{ns}"
    stub = inbox_pb2_grpc.InboxServiceStub(chan)
    await stub.Accept(accept_request(space, "k"), metadata=bearer(tokens.edge_a))
    [event] = (await stub.Claim(inbox_pb2.ClaimRequest(namespaces=[space]), metadata=bearer(tokens.worker_a))).events
    fence = {"namespace": space, "event_key": "k", "claim_token": event.claim_token}
    await stub.Fail(inbox_pb2.FailRequest(**fence, error="bad", permanent=True), metadata=bearer(tokens.worker_a))
    admin = admin_pb2_grpc.InboxAdminServiceStub(chan)
    await admin.Replay(
        admin_pb2.ReplayRequest(namespace=space, event_key="k", reason="fixed the template"),
        metadata=bearer(tokens.admin_a),
    )

    async def actors(conn: Any) -> list[tuple[str, str]]:
        cur = await conn.execute("SELECT actor, reason FROM inbox_replays WHERE namespace = %s", (space,))
        return [(str(a), str(r)) for a, r in await cur.fetchall()]

    assert await db.run(actors) == [("admin-a", "fixed the template")]
