"""A server on uvloop, the loop INBOXD_EVENT_LOOP=uvloop chooses (the default is asyncio's own)."""

from __future__ import annotations

import grpc

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc
from tests.harness import ServerProcess
from tests.integration.helpers import accept_request


def test_a_server_on_uvloop_accepts_and_claims(database_url: str) -> None:
    """The whole suite ran on uvloop while it was the default; this keeps the option honest."""
    server = ServerProcess(database_url=database_url, env={"INBOXD_EVENT_LOOP": "uvloop"}).start()
    try:
        with grpc.insecure_channel(server.target) as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)
            assert stub.Accept(accept_request("loop/uvloop", "k")).outcome == inbox_pb2.ACCEPT_OUTCOME_ACCEPTED
            claimed = stub.Claim(inbox_pb2.ClaimRequest(namespaces=["loop/uvloop"]))
            assert [e.event_key for e in claimed.events] == ["k"]
        assert server.terminate() == 0
    finally:
        server.kill()
