"""`inboxd show` lays a payload out by its content type, and `show --raw` writes its exact bytes alone."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import subprocess
import sys

from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.harness import REPO
from tests.integration.admin_fixtures import run_cli, run_cli_bytes
from tests.integration.helpers import accept_request
from tests.integration.test_cli import target

__all__ = ["target"]  # fixtures, imported so pytest finds them

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


async def test_show_raw_writes_the_accepted_bytes_alone_and_they_verify_a_signature(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    json_body = b'{"b": 1,   "a": [2,3],"b2":"\\u00e9"}'
    binary = bytes(range(256)) + b"\r\n\x00"
    await work.Accept(accept_request(ns, "json", json_body))
    await work.Accept(accept_request(ns, "bin", binary, content_type="application/octet-stream"))
    for key, body in (("json", json_body), ("bin", binary)):
        code, raw, errors = await run_cli_bytes("show", "--raw", ns, key, "--target", target)
        assert (code, errors) == (0, "")
        assert raw == body, key
    form = b"Body=hello+world&From=%2B15551234567&Body=again"
    await work.Accept(accept_request(ns, "form", form, content_type="application/x-www-form-urlencoded"))
    expected = hmac.new(SECRET.encode(), form, hashlib.sha256).hexdigest()
    assert await _hmac_through_openssl(ns, "form", "--target", target) == expected


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
    assert payload.startswith("application/json, 19 bytes)\n")
    assert payload.splitlines()[1:] == ["{", '  "order": {', '    "id": 42', "  }", "}"]


async def test_show_lays_out_a_form_text_and_binary_payload_by_its_content_type(
    work: InboxServiceStub, ns: str, target: str
) -> None:
    form = b"To=%2B1555&Body=two+words&To=x"
    await work.Accept(accept_request(ns, "k", form, content_type="application/x-www-form-urlencoded"))
    # Conflicting copies of the key, each shown by its own type.
    await work.Accept(accept_request(ns, "k", b"<a>\n\x1b[2J</a>", content_type="text/xml"))
    await work.Accept(accept_request(ns, "k", b"\x89PNG", content_type="image/png"))
    shown = await run_cli("show", ns, "k", "--target", target, "--conflict-payloads")
    assert shown.code == 0, shown.stderr
    assert "content type        application/x-www-form-urlencoded" in shown.stdout
    parts = shown.stdout.split("\n\n")
    assert parts[-1].splitlines() == [
        "payload (application/x-www-form-urlencoded, 30 bytes)",
        "To    +1555",
        "Body  two words",
        "To    x",
    ]
    assert parts[-3].splitlines() == ["conflicting copy 1's payload (text/xml, 12 bytes)", "<a>", "\\x1b[2J</a>"]
    assert parts[-2].splitlines() == [
        "conflicting copy 2's payload (image/png, 4 bytes, as hex)",
        "00000000  89 50 4e 47                                       |.PNG|",
    ]
    assert "\x1b" not in shown.stdout
