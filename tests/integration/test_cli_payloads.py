"""`inboxd show` lays a payload out by its content type, and `show --raw` writes its exact bytes alone."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import subprocess
import sys

from inboxd_client.v1 import admin_pb2
from inboxd_client.v1.admin_pb2_grpc import InboxAdminServiceStub
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import REPO
from tests.integration.admin_fixtures import clocked_admin, run_cli, run_cli_bytes
from tests.integration.helpers import accept_request
from tests.integration.test_cli import target

__all__ = ["clocked_admin", "target"]  # fixtures, imported so pytest finds them

SECRET = "whsec_test"


async def _hmac_through_openssl(*show: str) -> str:
    """`inboxd show --raw ... | openssl dgst -sha256 -hmac SECRET`, as an auditor would type it: the digest."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INBOXD_")}
    command = f"{sys.executable} -m inboxd show --raw {' '.join(show)} | openssl dgst -sha256 -hmac {SECRET} -r"
    # In a thread, so the in-process server keeps serving; pipefail, so a failed show fails the test.
    pipeline = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-o", "pipefail", "-c", command],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=clean,
    )
    return pipeline.stdout.split()[0]


async def test_show_raw_writes_the_payload_bytes_alone_and_they_verify_a_signature(
    work: InboxServiceStub, clocked_admin: InboxAdminServiceStub, ns: str, target: str
) -> None:
    body = b'{"b": 1,   "a": [2,3],"b2":"\\u00e9"}'
    await work.Accept(accept_request(ns, "k", body))
    stored = (await clocked_admin.GetEvent(admin_pb2.GetEventRequest(namespace=ns, event_key="k"))).event.payload
    code, raw, errors = await run_cli_bytes("show", "--raw", ns, "k", "--target", target)
    assert (code, errors) == (0, "")
    assert raw == stored
    assert (
        await _hmac_through_openssl(ns, "k", "--target", target)
        == hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    )


async def test_show_raw_keeps_errors_on_stderr_with_the_usual_exit_codes(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    await work.Accept(accept_request(ns, "k"))
    code, raw, errors = await run_cli_bytes("show", "--raw", ns, "ghost", "--target", target)
    assert (code, raw) == (1, b"")
    assert "NOT_FOUND" in errors
    both = await run_cli("show", "--raw", "--json", ns, "k", "--target", target)
    assert (both.code, both.stdout) == (2, "")
    assert "--raw" in both.stderr


async def test_show_names_the_content_type_and_pretty_prints_a_json_payload(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    await work.Accept(accept_request(ns, "k", b'{"order":{"id":42}}'))
    shown = await run_cli("show", ns, "k", "--target", target)
    assert shown.code == 0, shown.stderr
    assert "content type        application/json" in shown.stdout
    payload = shown.stdout.split("\n\npayload (", 1)[1]
    assert payload.startswith("application/json, ")
    assert payload.splitlines()[1:] == ["{", '  "order": {', '    "id": 42', "  }", "}"]
