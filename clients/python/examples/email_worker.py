"""Example worker: one welcome email per `user.signed_up` event, never two, through an HTTP email API.

The email API (any provider built like this one) takes
    POST {EMAIL_API_URL}/v1/messages   with an `Idempotency-Key` header -> 200 {"id": "msg_..."}
and answers a repeat of a key with the first send's id instead of sending again; and
    GET  {EMAIL_API_URL}/v1/messages/by-key/{key}   -> 200 {"id": ...} if sent, 404 if not.

What makes it exactly one email per event, whatever dies when:
- `ctx.run_action` records INTENDED before the POST and gets the event's one
  idempotency key, the same on every retry and every worker;
- after a timeout, a dropped connection or a worker killed mid-request, the
  action is UNKNOWN (or left INTENDED); the next claim asks the API by key
  (`lookup`) before sending again, and skips the send if it happened;
- an action recorded SUCCEEDED is never run again.

Run it against inboxd:
    INBOXD_TARGET=127.0.0.1:50051 INBOXD_NAMESPACE=signup EMAIL_API_URL=http://127.0.0.1:8025 \\
        python email_worker.py
Other settings: INBOXD_TOKEN, INBOXD_CONCURRENCY (4), INBOXD_LEASE (30 s), INBOXD_WAIT (10 s),
INBOXD_USE_STREAMS (unset: the Work stream, or unary Claims on a server without it; 1 or 0 forces one).
SIGTERM stops it gracefully: running sends finish, unfinished events are released.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any

from inboxd_client import AsyncInboxClient, Ignore, PermanentError, Reconciled, SyncEventContext, Worker

EMAIL_API_URL = os.environ.get("EMAIL_API_URL", "http://127.0.0.1:8025")
HTTP_TIMEOUT = 10.0


def send_welcome(ctx: SyncEventContext) -> Ignore | None:
    """The handler: runs in a thread, once per claim of a `user.signed_up` event."""
    user = ctx.json()
    if not user.get("email"):
        return Ignore("the user left no email address")
    ctx.run_action("send-welcome:v1", lambda key: post_message(user, key), reconcile=lookup_message)
    return None


def post_message(user: dict[str, Any], idempotency_key: str) -> str:
    """Sends the email; answers the API's message id, recorded as the action's external_ref."""
    body = {"to": user["email"], "subject": "Welcome!", "text": f"Hello {user.get('name', 'there')}."}
    request = urllib.request.Request(
        f"{EMAIL_API_URL}/v1/messages",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as response:
            return str(json.load(response)["id"])
    except urllib.error.HTTPError as exc:
        if 400 <= exc.code < 500 and exc.code != 429:
            # The API refused this email outright; retrying will not change its mind.
            raise PermanentError(f"the email API refused the message: HTTP {exc.code}") from exc
        raise  # 429 or 5xx: the event is retried (a 5xx is recorded UNKNOWN and looked up first)


def lookup_message(idempotency_key: str) -> Reconciled | None:
    """Reconciliation: did a send with this key happen? Asks the API instead of guessing."""
    url = f"{EMAIL_API_URL}/v1/messages/by-key/{idempotency_key}"
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as response:
            return Reconciled(succeeded=True, external_ref=str(json.load(response)["id"]))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return Reconciled(succeeded=False, detail="the email API has no message with this key")
        raise  # cannot tell now: the event is retried and looked up again later


async def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(message)s")
    target = os.environ.get("INBOXD_TARGET", "127.0.0.1:50051")
    async with AsyncInboxClient(target, token=os.environ.get("INBOXD_TOKEN")) as client:
        worker = Worker(
            client,
            send_welcome,
            namespaces=[os.environ.get("INBOXD_NAMESPACE", "signup")],
            event_types=["user.signed_up"],
            concurrency=int(os.environ.get("INBOXD_CONCURRENCY", "4")),
            lease=float(os.environ.get("INBOXD_LEASE", "30")),
            wait=float(os.environ.get("INBOXD_WAIT", "10")),
            # The Work stream, or unary Claims on a server without it; "1" or "0" forces one.
            use_streams={"1": True, "0": False}.get(os.environ.get("INBOXD_USE_STREAMS", "")),
        )
        await worker.run()
    logging.info("stopped: %s", worker.stats)


if __name__ == "__main__":
    asyncio.run(main())
