"""The console's test rig: a real inboxd with a tokens file and its console on port 0, and real data.

Events are made through the real gRPC API (Accept, Claim, Fail...), so the
console shows what a worker fleet would have left behind.
"""

from __future__ import annotations

import json
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.conftest import NO_RESCUER
from tests.integration.certs import make_certs

CHROMIUM = Path("/usr/bin/chromium")
# As root, in a sandbox without a network: no sandbox, no GPU, nothing that phones home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@dataclass(frozen=True)
class Tokens:
    operator: str  # admin scope, the shop's namespaces only
    worker: str  # work scope only
    root: str  # every scope, every namespace: makes the test data
    file: Path


def write_tokens(path: Path, shop: str) -> Tokens:
    grants = {
        "ops-oncall": ([Scope.ADMIN], [f"{shop}/*"]),
        "worker-shop": ([Scope.WORK], [f"{shop}/*"]),
        "root": (list(Scope), ["*"]),
    }
    tokens = {name: new_token() for name in grants}
    path.write_text("\n".join(entry_toml(n, tokens[n], *grants[n]) for n in grants))
    return Tokens(tokens["ops-oncall"], tokens["worker-shop"], tokens["root"], path)


@dataclass
class Rig:
    server: RunningServer
    tokens: Tokens
    # The server's registry: a test may edit the tokens file and reload it, as SIGHUP would.
    registry: TokenRegistry
    channel: grpc.aio.Channel
    # This run's namespaces: the operator's tenant, and another tenant it must never see.
    shop: str
    other: str

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.console_port}"

    @property
    def _auth(self) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {self.tokens.root}")]

    async def accept(
        self, ns: str, key: str, payload: Any = None, event_type: str = "charge.succeeded", content_type: str = ""
    ) -> None:
        """Accepts `payload` as JSON, or as it is when it is bytes (under `content_type`)."""
        body = (
            payload if isinstance(payload, bytes) else json.dumps({"id": key} if payload is None else payload).encode()
        )
        request = inbox_pb2.AcceptRequest(
            namespace=ns,
            event_key=key,
            event_type=event_type,
            payload=body,
            metadata={"delivery": "d_" + key},
            content_type=content_type,
        )
        await inbox_pb2_grpc.InboxServiceStub(self.channel).Accept(request, metadata=self._auth)

    async def accept_keyed(self, ns: str, key: str, ordering_key: str, event_type: str = "cart.updated") -> None:
        """Accepts `key` under an ordering key: one event of the key at a time is handed out."""
        request = inbox_pb2.AcceptRequest(
            namespace=ns, event_key=key, event_type=event_type, payload=b"{}", ordering_key=ordering_key
        )
        await inbox_pb2_grpc.InboxServiceStub(self.channel).Accept(request, metadata=self._auth)

    async def claim(self, ns: str, event_type: str, worker: str = "worker-7") -> inbox_pb2.ClaimedEvent:
        answer = await inbox_pb2_grpc.InboxServiceStub(self.channel).Claim(
            inbox_pb2.ClaimRequest(namespaces=[ns], event_types=[event_type], worker_id=worker), metadata=self._auth
        )
        assert len(answer.events) == 1, f"expected one event to claim in {ns}"
        event: inbox_pb2.ClaimedEvent = answer.events[0]
        return event

    async def dead_letter(self, ns: str, key: str, error: str = "schema: field 'amount' missing") -> None:
        """Accepts `key`, claims it, records an intended action, and fails it permanently."""
        # A type of its own, so the claim takes this event and no other pending one.
        await self.accept(ns, key, event_type="charge.refunded")
        event = await self.claim(ns, "charge.refunded")
        stub = inbox_pb2_grpc.InboxServiceStub(self.channel)
        fenced: dict[str, Any] = {"namespace": ns, "event_key": key, "claim_token": event.claim_token}
        await stub.RecordActionOutcome(
            inbox_pb2.RecordActionOutcomeRequest(
                **fenced, action="send-receipt:v1", state=types_pb2.ACTION_STATE_INTENDED
            ),
            metadata=self._auth,
        )
        answer = await stub.Fail(inbox_pb2.FailRequest(**fenced, error=error, permanent=True), metadata=self._auth)
        assert answer.state == types_pb2.EVENT_STATE_DEAD_LETTERED

    async def event(self, ns: str, key: str) -> admin_pb2.Event:
        answer = await admin_pb2_grpc.InboxAdminServiceStub(self.channel).GetEvent(
            admin_pb2.GetEventRequest(namespace=ns, event_key=key), metadata=self._auth
        )
        event: admin_pb2.Event = answer.event
        return event


def page_csrf(page: str) -> str:
    """The CSRF token of a page's first form."""
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def http_sign_in(http: aiohttp.ClientSession, base: str, token: str) -> aiohttp.ClientResponse:
    """The sign-in form, then its POST, as a browser would (without following the redirect)."""
    async with http.get(f"{base}/signin") as form:
        page = await form.text()
    return await http.post(f"{base}/signin", data={"token": token, "csrf": page_csrf(page)}, allow_redirects=False)


def cookie_jar() -> aiohttp.CookieJar:
    # unsafe=True: the jar keeps cookies of an IP address such as 127.0.0.1 (browsers do).
    return aiohttp.CookieJar(unsafe=True)


def unique_tenants() -> tuple[str, str]:
    run = uuid.uuid4().hex[:6]
    return f"shop-{run}", f"rival-{run}"


async def start_tls_console(
    db: Database, folder: Path, console_listen: str
) -> tuple[RunningServer, Tokens, ssl.SSLContext]:
    """A server whose console serves TLS on `console_listen`, the shop's tokens, and a context that trusts it."""
    certs = make_certs(folder)
    tokens = write_tokens(folder / "tokens.toml", "shop")
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        console_listen=console_listen,
        tokens_file=tokens.file,
        tls_cert=certs.server_cert,
        tls_key=certs.server_key,
    )
    trust = ssl.create_default_context(cafile=str(certs.ca))
    return await start_server(settings, db, registry=TokenRegistry(tokens.file)), tokens, trust
