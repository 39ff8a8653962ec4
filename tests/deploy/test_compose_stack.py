"""deploy/compose.yaml brought up with podman-compose: a signed delivery through the edge, completed by the worker.

The images are the real ones: inboxd's from ./Containerfile (scripts/build-image.sh: the release's wheels, no
network in the build, skipped when its sources are unchanged) and PostgreSQL's from deploy/postgres/Containerfile,
both on Debian bases made locally with mmdebstrap when no registry is reachable. The stack gets tokens, a
webhook secret and a password of its own, and a free port for the edge. Skipped without podman (make setup
installs it as root: scripts/ensure-podman.sh). First run on a fresh machine: the bases and the image take a few
minutes; later runs about 40 s.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from standardwebhooks.webhooks import Webhook

import inboxd
from inboxd.config.tokens import Scope, entry_toml, new_token

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = [sys.executable, "-m", "podman_compose"]
IMAGE = f"localhost/inboxd:{inboxd.__version__}"
POSTGRES_IMAGE = "localhost/inboxd-postgres:15"
UP_TIMEOUT = 180.0

pytestmark = pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman (make setup installs it as root)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Stack:
    project: str
    env: dict[str, str]
    edge: str
    admin_token: str
    secret: str

    def compose(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COMPOSE, "-p", self.project, "-f", str(ROOT / "deploy/compose.yaml"), *args],
            env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def podman(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", *args], check=False, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def logs(self, service: str) -> str:
        done = self.podman("logs", self.container(service))
        return done.stdout + done.stderr


def _webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def _build(scripts: dict[str, dict[str, str]]) -> None:
    """Runs the image builds side by side (on a fresh machine both wait on Debian's mirror and the index)."""
    running = {
        script: subprocess.Popen(
            [str(ROOT / "scripts" / script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for script, env in scripts.items()
    }
    for script, process in running.items():
        output, _ = process.communicate(timeout=900)
        assert process.returncode == 0, f"{script}: {output}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "deploy/podman/containers.conf")}
    _build({"build-postgres-image.sh": {**env, "IMAGE": POSTGRES_IMAGE}, "build-image.sh": {**env, "IMAGE": IMAGE}})
    tokens = {name: new_token() for name in ("edge", "worker", "admin")}
    scopes = {"edge": Scope.ACCEPT, "worker": Scope.WORK, "admin": Scope.ADMIN}
    tokens_file = tmp_path_factory.mktemp("compose") / "tokens.toml"
    tokens_file.write_text("\n".join(entry_toml(f"test-{n}", t, [scopes[n]], ["demo"]) for n, t in tokens.items()))
    tokens_file.chmod(0o644)  # read by the image's user 10001
    edge_port = _free_port()
    secret = _webhook_secret()
    env |= {
        "INBOXD_IMAGE": IMAGE,
        "POSTGRES_IMAGE": POSTGRES_IMAGE,
        "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
        "INBOXD_EDGE_TOKEN": tokens["edge"],
        "INBOXD_WORKER_TOKEN": tokens["worker"],
        "DEMO_WEBHOOK_SECRET": secret,
        "INBOXD_TOKENS_TOML": str(tokens_file),
        "EDGE_PUBLISH": f"127.0.0.1:{edge_port}",
    }
    stack = Stack(f"inboxdtest{os.getpid()}", env, f"http://127.0.0.1:{edge_port}", tokens["admin"], secret)
    up = stack.compose("up", "-d")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        _wait_ready(stack)
        yield stack
    finally:
        stack.compose("down", "-v", "-t", "5")


def _wait_ready(stack: Stack) -> None:
    """Both replicas' HEALTHCHECK passes and the edge's /readyz answers 200 (bounded)."""
    deadline = time.monotonic() + UP_TIMEOUT
    last = ""
    while time.monotonic() < deadline:
        healthy = [stack.podman("healthcheck", "run", stack.container(r)) for r in ("inboxd-1", "inboxd-2")]
        last = " ".join(done.stdout.strip() for done in healthy)
        if all(done.returncode == 0 for done in healthy):
            try:
                with urllib.request.urlopen(f"{stack.edge}/readyz", timeout=3) as response:
                    if response.status == 200:
                        return
            except (OSError, urllib.error.HTTPError) as exc:
                last = f"edge: {exc}"
        time.sleep(1.0)
    logs = "\n".join(f"== {s}\n{stack.logs(s)[-2000:]}" for s in ("postgres", "inboxd-1", "inboxd-2", "edge"))
    pytest.fail(f"the stack was not ready within {UP_TIMEOUT:.0f} s ({last})\n{logs}")


def _deliver(stack: Stack, message_id: str, payload: dict[str, object]) -> tuple[int, bytes]:
    body = json.dumps(payload)
    now = datetime.now(tz=UTC)
    headers = {
        "Content-Type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(stack.secret).sign(message_id, now, body),
    }
    request = urllib.request.Request(f"{stack.edge}/hooks/demo", data=body.encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _state(stack: Stack, event_key: str) -> str:
    shown = stack.podman(
        "exec", stack.container("inboxd-1"),
        "inboxd", "show", "--target", "127.0.0.1:50051", "--token", stack.admin_token, "--json", "demo", event_key,
    )  # fmt: skip
    return str(json.loads(shown.stdout)["summary"]["state"]) if shown.returncode == 0 else shown.stderr.strip()


def test_signed_delivery_through_the_edge_is_completed_by_the_sample_worker(stack: Stack) -> None:
    message_id = f"msg_{secrets.token_hex(6)}"
    payload: dict[str, object] = {"type": "demo.ping", "data": {"from": "the compose test"}}
    # As a provider does, a 503 is delivered again: right after the stack starts, the edge's /readyz (its own
    # health channel) can answer 200 while its Accept channels are still in their reconnect backoff (up to 5 s),
    # and the first delivery is then 503 (seen in about 1 run in 4).
    deadline = time.monotonic() + 30.0
    status, answer = _deliver(stack, message_id, payload)
    while status == 503 and time.monotonic() < deadline:
        time.sleep(1.0)
        status, answer = _deliver(stack, message_id, payload)
    assert (status, json.loads(answer)) == (200, {"outcome": "accepted"}), stack.logs("edge")[-3000:]
    deadline = time.monotonic() + 60.0
    state = ""
    while time.monotonic() < deadline and state != "EVENT_STATE_COMPLETED":
        state = _state(stack, message_id)
        time.sleep(0.5)
    assert state == "EVENT_STATE_COMPLETED", f"{state}\n{stack.logs('worker')[-3000:]}"
    assert f"handling demo.ping demo/{message_id}" in stack.logs("worker")


def test_delivery_with_a_wrong_signature_is_refused_at_the_edge(stack: Stack) -> None:
    forged = Stack(stack.project, stack.env, stack.edge, stack.admin_token, _webhook_secret())
    status, _ = _deliver(forged, f"msg_{secrets.token_hex(6)}", {"type": "demo.ping", "data": {}})
    assert status == 401


def test_both_replicas_serve_and_exactly_one_applied_the_migrations(stack: Stack) -> None:
    applied = 0
    for replica in ("inboxd-1", "inboxd-2"):
        logs = stack.logs(replica)
        assert "inboxd serving on 0.0.0.0:50051" in logs, logs[-2000:]
        applied += "applied migrations:" in logs
        # The image's HEALTHCHECK (inboxd-probe, gRPC health) passes on each.
        checked = stack.podman("healthcheck", "run", stack.container(replica))
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert applied == 1
