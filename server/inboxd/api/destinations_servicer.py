"""The destinations' RPCs of InboxAdminService (a base of api.admin_servicer.AdminServicer)."""

from __future__ import annotations

from typing import Any

import grpc

from inboxd.api import destinations_convert as convert
from inboxd.api.identity import current_caller
from inboxd.usecases.admin import Operators
from inboxd_client.v1 import admin_pb2

Context = grpc.aio.ServicerContext[Any, Any]


class DestinationsServicer:
    operators: Operators

    async def CreateDestination(
        self, request: admin_pb2.CreateDestinationRequest, context: Context
    ) -> admin_pb2.CreateDestinationResponse:
        created = await self.operators.create_destination(
            convert.spec_from_proto(request), reason=request.reason, caller=current_caller()
        )
        # The secret is answered here once; no other answer carries it.
        return admin_pb2.CreateDestinationResponse(
            destination=convert.destination_to_proto(created), secret=created.spec.secret
        )

    async def GetDestination(
        self, request: admin_pb2.GetDestinationRequest, context: Context
    ) -> admin_pb2.GetDestinationResponse:
        destination, attempts = await self.operators.get_destination(request.name, caller=current_caller())
        return admin_pb2.GetDestinationResponse(
            destination=convert.destination_to_proto(destination),
            recent_attempts=[convert.attempt_to_proto(a) for a in attempts],
        )

    async def ListDestinations(
        self, request: admin_pb2.ListDestinationsRequest, context: Context
    ) -> admin_pb2.ListDestinationsResponse:
        every = await self.operators.list_destinations(caller=current_caller())
        return admin_pb2.ListDestinationsResponse(destinations=[convert.destination_to_proto(d) for d in every])

    async def DeleteDestination(
        self, request: admin_pb2.DeleteDestinationRequest, context: Context
    ) -> admin_pb2.DeleteDestinationResponse:
        await self.operators.delete_destination(request.name, reason=request.reason, caller=current_caller())
        return admin_pb2.DeleteDestinationResponse()

    async def ResumeDestination(
        self, request: admin_pb2.ResumeDestinationRequest, context: Context
    ) -> admin_pb2.ResumeDestinationResponse:
        destination = await self.operators.resume_destination(
            request.name, reason=request.reason, caller=current_caller()
        )
        return admin_pb2.ResumeDestinationResponse(destination=convert.destination_to_proto(destination))
