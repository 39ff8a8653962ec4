"""A GitHub App's one webhook for every event: typed by X-GitHub-Event, keyed by the body's digest.

The event header is unsigned. A delivery re-posted under another event
header has the same key (the body's SHA-256) and another type: inboxd
answers CONFLICT and keeps the original, so a relabelled re-post is never a
new event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_edge.config import config_from_data
from inboxd_edge.serve import RunningEdge, start_edge
from tests.edge.rig import post, sign_github, stored_events

APP_SECRET = "github-app-secret-test"


@pytest.fixture(scope="module")
async def edge(server: RunningServer) -> AsyncIterator[RunningEdge]:
    route = {
        "name": "github-app",
        "path": "/hooks/github-app",
        "scheme": "github",
        "secrets": [APP_SECRET],
        "namespace": "github-app/{owner}",
        "vars": {"owner": "body:/repository/owner/login"},
        "event_type": "header:X-GitHub-Event",
        "allowed_types": ["push", "issues"],
    }
    config = config_from_data({"inboxd": {"target": f"127.0.0.1:{server.port}"}, "routes": [route]}, {})
    running = await start_edge(config, listen="127.0.0.1:0")
    yield running
    await running.stop()


async def test_one_route_takes_every_event_type_and_a_relabelled_repost_is_a_conflict_that_keeps_the_original(
    edge: RunningEdge, http: aiohttp.ClientSession, db: Database
) -> None:
    url = f"{edge.url}/hooks/github-app"
    push = json.dumps({"ref": "refs/heads/main", "repository": {"owner": {"login": "acme-app"}}}).encode()
    issue = json.dumps({"action": "opened", "repository": {"owner": {"login": "acme-app"}}}).encode()
    headers = {**sign_github(push, APP_SECRET), "X-GitHub-Event": "push", "X-GitHub-Delivery": "d-1"}
    assert (await post(http, url, push, headers)).outcome == "accepted"
    issue_headers = {**sign_github(issue, APP_SECRET), "X-GitHub-Event": "issues", "X-GitHub-Delivery": "d-2"}
    assert (await post(http, url, issue, issue_headers)).outcome == "accepted"
    # The push re-posted as an "issues" event: same signed body, same key, another type.
    relabelled = await post(http, url, push, {**headers, "X-GitHub-Event": "issues"})
    assert (relabelled.status, relabelled.outcome) == (200, "conflict")
    rows = await stored_events(db, "github-app/acme-app")
    assert sorted(r["event_type"] for r in rows.values()) == ["issues", "push"]
