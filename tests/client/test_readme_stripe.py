"""clients/python/README.md's Stripe handler, run as written: it verifies the signature again from a claimed event.

The event is accepted as the edge forwards a Stripe delivery (the body's
bytes, the Stripe-Signature header in metadata as inboxd.signature.stripe-signature)
and signed by the `stripe` library itself; the README's block is executed and its handler run by a Worker.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import stripe

from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient, EventContext, Worker
from tests.client.helpers import eventually, read_event, running

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"
SECRET = "whsec_readme_test_secret"
SIGNATURE_KEY = "inboxd.signature.stripe-signature"

Handler = Callable[[EventContext], Awaitable[None]]


@pytest.fixture
def handle_stripe(monkeypatch: pytest.MonkeyPatch) -> Handler:
    """The README's `handle_stripe`, from the one block that calls `stripe.Webhook.construct_event`."""
    [block] = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S) if "construct_event" in b]
    monkeypatch.setenv("STRIPE_WEBHOOK_SECRET", SECRET)
    names: dict[str, object] = {}
    exec(compile(block, str(README), "exec"), names)
    handler = names["handle_stripe"]
    assert callable(handler)
    return handler


def stripe_body(event_id: str) -> bytes:
    # Stripe's own layout (two-space indents, a newline at the end), which a re-encoding would not keep.
    return (
        f'{{\n  "id": "{event_id}",\n  "object": "event",\n  "type": "payment_intent.succeeded",\n'
        '  "data": {"object": {"id": "pi_1", "amount": 1999}}\n}\n'
    ).encode()


def signature(body: bytes) -> str:
    return str(stripe.WebhookSignature.generate_signature_header(body.decode(), SECRET))


async def test_the_readme_stripe_handler_verifies_a_delivery_from_its_claimed_bytes(
    client: AsyncInboxClient, db: Database, ns: str, handle_stripe: Handler
) -> None:
    signed = stripe_body("evt_signed")
    # Accepted around the edge with another body's signature: its bytes are not what Stripe signed.
    forged = stripe_body("evt_forged")
    await client.accept(
        ns, "evt_signed", "payment_intent.succeeded", signed, metadata={SIGNATURE_KEY: signature(signed)}
    )
    await client.accept(
        ns, "evt_forged", "payment_intent.succeeded", forged, metadata={SIGNATURE_KEY: signature(signed)}
    )
    verified: list[str] = []

    async def handle(ctx: EventContext) -> None:
        await handle_stripe(ctx)
        verified.append(ctx.event_key)

    worker = Worker(client, handle, namespaces=[ns], wait=1.0)
    async with running(worker):
        await eventually(lambda: worker.stats.completed + worker.stats.dead_lettered == 2, "both events finished")
    assert verified == ["evt_signed"]
    assert (await read_event(db, ns, "evt_signed"))["state"] == "completed"
    forged_row = await read_event(db, ns, "evt_forged")
    assert forged_row["state"] == "dead_lettered"
    assert "not signed by Stripe: No signatures found matching the expected signature" in forged_row["last_error"]
