"""Small helpers shared by the integration tests."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from inboxd_client.v1 import inbox_pb2


def accept_request(ns: str, key: str, payload: Any = None, **fields: Any) -> inbox_pb2.AcceptRequest:
    body = payload if isinstance(payload, bytes) else json.dumps({"id": key} if payload is None else payload).encode()
    fields.setdefault("event_type", "test.event")
    return inbox_pb2.AcceptRequest(namespace=ns, event_key=key, payload=body, **fields)


async def expect_status(call: Any, code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    """Awaits `call` and returns its error, failing the test unless the status is `code`."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, f"{caught.value.code()}: {caught.value.details()}"
    return caught.value
