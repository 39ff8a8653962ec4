"""A type the route does not list: refused 422 (the default), answered 200 and dropped, or taken as any other.

Stripe counts a 4xx as a failed delivery, retries for days and may disable the
endpoint: ``other_types = "ignore"`` keeps it healthy while the route file
catches up with a type added in the dashboard, and stores nothing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_edge.config import ConfigError, config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import as_body, post, sign_stripe, stored_events

POLICIES = ("reject", "ignore", "accept")


def routes(target: str, **extra: Any) -> dict[str, Any]:
    return {
        "inboxd": {"target": target},
        "routes": [
            {
                "name": f"other-{policy}",
                "path": f"/hooks/other/{policy}",
                "scheme": "stripe",
                "secrets": [f"whsec_other_{policy}"],
                "namespace": f"other/{policy}",
                "allowed_types": ["invoice.paid"],
                **({} if policy == "reject" else {"other_types": policy}),
                **extra,
            }
            for policy in POLICIES
        ],
    }


@pytest.fixture(scope="module")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    running = await start_edge(config_from_data(routes(f"127.0.0.1:{server.port}"), {}), listen="127.0.0.1:0")
    yield running
    await running.stop()


@pytest.mark.parametrize(
    ("policy", "status", "outcome", "stored"),
    [("reject", 422, "unsupported_type", []), ("ignore", 200, "ignored", []), ("accept", 200, "accepted", ["evt_n"])],
)
async def test_a_type_the_route_does_not_list_is_refused_ignored_or_taken_as_other_types_says(
    edge: RunningEdge,
    http: aiohttp.ClientSession,
    db: Database,
    caplog: pytest.LogCaptureFixture,
    policy: str,
    status: int,
    outcome: str,
    stored: list[str],
) -> None:
    body = as_body({"id": "evt_n", "type": "customer.created"})
    with caplog.at_level(logging.INFO, logger="inboxd_edge.observations"):
        reply = await post(http, f"{edge.url}/hooks/other/{policy}", body, sign_stripe(body, f"whsec_other_{policy}"))
    assert (reply.status, reply.outcome) == (status, outcome)
    assert list(await stored_events(db, f"other/{policy}")) == stored
    assert ("ignored type route='other-ignore' type='customer.created'" in caplog.text) == (policy == "ignore")
    # A listed type is taken whatever the policy.
    listed = as_body({"id": "evt_l", "type": "invoice.paid"})
    reply = await post(http, f"{edge.url}/hooks/other/{policy}", listed, sign_stripe(listed, f"whsec_other_{policy}"))
    assert reply.outcome == "accepted"


def test_an_unknown_other_types_value_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="other_types must be one of reject, ignore, accept, not 'drop'"):
        config_from_data(routes("127.0.0.1:1", other_types="drop"), {})
