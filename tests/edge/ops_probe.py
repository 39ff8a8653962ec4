"""The edge's /metrics after a little of everything, for the deploy check's list of exported names and labels."""

from __future__ import annotations

import asyncio
import hashlib
import hmac

import aiohttp

from inboxd_edge.config import config_from_data
from inboxd_edge.serve import start_edge
from tests.edge.edge_process import stripe_delivery
from tests.edge.rig import STRIPE_NEW_SECRET

GITHUB_SECRET = "probe-github-secret"


async def edge_metrics_text(inboxd_target: str) -> str:
    """An edge in this process before inboxd at `inboxd_target`: a signed delivery, a bad signature, connections
    past the cap; then its /metrics text."""
    config = config_from_data(
        {
            "inboxd": {"target": inboxd_target},
            "metrics": {"listen": "127.0.0.1:0"},
            "limits": {"max_connections": 8},
            "routes": [
                {
                    "name": "stripe-probe",
                    "path": "/hooks/stripe",
                    "scheme": "stripe",
                    "secrets": [STRIPE_NEW_SECRET],
                    "namespace": "stripe/{account}",
                    "vars": {"account": "body:/account"},
                    "allowed_types": ["payment_intent.succeeded"],
                    "other_types": "ignore",
                },
                {
                    "name": "github-probe",
                    "path": "/hooks/github",
                    "scheme": "github",
                    "secrets": [GITHUB_SECRET],
                    "namespace": "github/probe",
                    "event_type": "const:push",
                    "allowed_types": ["push"],
                },
            ],
        },
        {},
    )
    edge = await start_edge(config, listen="127.0.0.1:0")
    try:
        async with aiohttp.ClientSession() as http:
            body, headers, _ = stripe_delivery()
            async with http.post(f"{edge.url}/hooks/stripe", data=body, headers=headers) as response:
                assert response.status == 200
            async with http.post(f"{edge.url}/hooks/stripe", data=body + b" ", headers=headers) as response:
                assert response.status == 401
            # Nine idle connections against a cap of eight: the oldest is closed for the ninth ("evicted").
            held = [await asyncio.open_connection(edge.host, edge.port) for _ in range(9)]
            for _, writer in held:
                writer.close()
            # A type the route does not list, ignored (other_types), and GitHub's ping, a handshake: each counted.
            other, other_headers, _ = stripe_delivery(event_type="customer.created")
            async with http.post(f"{edge.url}/hooks/stripe", data=other, headers=other_headers) as response:
                assert response.status == 200
            ping = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
            signature = "sha256=" + hmac.new(GITHUB_SECRET.encode(), ping, hashlib.sha256).hexdigest()
            ping_headers = {
                "X-Hub-Signature-256": signature,
                "X-GitHub-Event": "ping",
                "Content-Type": "application/json",
            }
            async with http.post(f"{edge.url}/hooks/github", data=ping, headers=ping_headers) as response:
                assert response.status == 200
            for _ in range(100):
                async with http.get(f"http://127.0.0.1:{edge.metrics_port}/metrics") as response:
                    assert response.status == 200
                    text = await response.text()
                # The listener accepts the nine on its own time: wait (boundedly) for the eviction's count.
                if "inboxd_edge_connections_closed_early_total{" in text:
                    break
                await asyncio.sleep(0.1)
            return text
    finally:
        await edge.stop()
