"""InboxService: the data plane for edges and workers."""

from __future__ import annotations

from typing import Any

import grpc
from inboxd_client.v1 import inbox_pb2

from inboxd.api import convert
from inboxd.errors import InvalidArgument
from inboxd.inbox import Inbox

MAX_BATCH_EVENTS = 500

Context = grpc.aio.ServicerContext[Any, Any]


class InboxServicer:
    """Methods are named after the RPCs; `api.handlers` routes to them."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def Accept(self, request: inbox_pb2.AcceptRequest, context: Context) -> inbox_pb2.AcceptResponse:
        event = convert.new_event(request, self.inbox.settings.max_payload_bytes)
        [result] = await self.inbox.accept([event])
        return convert.accept_response(result)

    async def AcceptBatch(
        self, request: inbox_pb2.AcceptBatchRequest, context: Context
    ) -> inbox_pb2.AcceptBatchResponse:
        count = len(request.events)
        if not 1 <= count <= MAX_BATCH_EVENTS:
            raise InvalidArgument("events", f"holds {count} events; send 1 to {MAX_BATCH_EVENTS}")
        events = []
        for index, item in enumerate(request.events):
            try:
                events.append(convert.new_event(item, self.inbox.settings.max_payload_bytes))
            except InvalidArgument as exc:
                raise InvalidArgument(f"events[{index}].{exc.field}", exc.problem) from None
        results = await self.inbox.accept(events)
        return inbox_pb2.AcceptBatchResponse(results=[convert.accept_response(r) for r in results])
