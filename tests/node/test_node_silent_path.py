"""A Node worker behind a path that goes silent (clients/node/test/silent-path.test.js) notices it by its own pings.

The server here pings every 0.5 s (so it permits a client's ping that often) but waits 60 s for
an answer: the noticing is the client's. Without keepalive in the Node client, its stream stayed
open for as long as the test waited.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Database
from tests.conftest import NO_BULK_RUNNER, NO_RESCUER
from tests.node.runner import NODE_TESTS, run_node_tests


@pytest.fixture(scope="module")
async def lenient_server(db: Database) -> AsyncIterator[RunningServer]:
    settings = Settings(
        listen="127.0.0.1:0",
        rescue_interval=NO_RESCUER,
        bulk_poll=NO_BULK_RUNNER,
        keepalive_time=timedelta(seconds=0.5),
        keepalive_timeout=timedelta(seconds=60),
    )
    running = await start_server(settings, db)
    yield running
    await running.stop(1.0)


async def test_a_node_workers_stream_ends_when_its_path_goes_silent_and_it_subscribes_again(
    lenient_server: RunningServer,
) -> None:
    output = await run_node_tests(lenient_server, [NODE_TESTS / "silent-path.test.js"])
    assert "# noticed " in output, output[-2000:]
    print(output[output.index("# noticed ") :].splitlines()[0])
