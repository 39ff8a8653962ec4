"""A Node client held to gRPC's 4 MiB receive limit takes big events in several Claims, each answer received.

Issue 25, item 2, as it was seen: six events of about 900 KiB, a Node
client with grpc-js's default receive limit: every Claim failed with
RESOURCE_EXHAUSTED after the server had leased the events, until they were
dead letters. The limit is set explicitly here, so the test holds whatever
the client's own default becomes.
"""

from __future__ import annotations

import asyncio
import json
import os

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client.v1 import inbox_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, read_event
from tests.node.runner import NODE_PACKAGE, NODE_TIMEOUT_SECONDS, node_or_fail

SCRIPT = """
import { InboxClient } from './src/index.js';
const client = new InboxClient({
  target: process.env.INBOXD_TARGET,
  channelOptions: { 'grpc.max_receive_message_length': 4 * 1024 * 1024 },
});
const [namespace, count] = [process.argv[1], Number(process.argv[2])];
const answers = [];
let taken = 0;
try {
  while (taken < count) {
    const { events } = await client.claim({ namespaces: [namespace], maxEvents: count });
    if (events.length === 0) throw new Error(`an empty Claim with ${count - taken} events still due`);
    answers.push(events.map((e) => [e.eventKey, e.attempt]));
    taken += events.length;
  }
  console.log(JSON.stringify(answers));
} finally {
  client.close();
}
"""


async def test_a_node_client_with_a_4_mib_receive_limit_receives_every_claim_of_big_events(
    server: RunningServer, inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    node = node_or_fail()
    keys = [f"big-{i}" for i in range(6)]
    filler = "x" * (900 * 1024)
    await inbox.AcceptBatch(
        inbox_pb2.AcceptBatchRequest(events=[accept_request(ns, key, {"fill": filler}) for key in keys])
    )
    proc = await asyncio.create_subprocess_exec(
        node, "--input-type=module", "-e", SCRIPT, ns, str(len(keys)),
        cwd=NODE_PACKAGE,
        env={**os.environ, "INBOXD_TARGET": f"127.0.0.1:{server.port}"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), NODE_TIMEOUT_SECONDS)
    assert proc.returncode == 0, err.decode()
    answers = json.loads(out)
    assert len(answers) > 1
    assert sorted(key for answer in answers for key, _ in answer) == keys
    assert {attempt for answer in answers for _, attempt in answer} == {1}
    for key in keys:
        row = await read_event(db, ns, key)
        assert (row["state"], row["attempt"]) == ("processing", 1)
