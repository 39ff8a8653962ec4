"""The console's bulk page over a token's cap on running operations: refused in words (429), never a 500."""

from __future__ import annotations

import grpc

from inboxd_client.v1 import admin_pb2, admin_pb2_grpc
from tests.console.rig import Rig
from tests.console.test_console_bulk import form_of, operations_on
from tests.console.test_console_flow import post, signed_in

MOST_TRIES = 10


async def test_a_start_over_the_tokens_cap_is_refused_on_the_form_with_the_cap_named(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-capped"
    # Enough for each operation to replay one and then sleep ten seconds at its pace: none ends meanwhile.
    for i in range(MOST_TRIES):
        await rig.dead_letter(ns, f"evt_{i}", error="SMTP timeout")
    stub = admin_pb2_grpc.InboxAdminServiceStub(rig.channel)
    operator = [("authorization", f"Bearer {rig.tokens.operator}")]
    started: list[str] = []
    try:
        # The operator's token starts slow operations until its cap says no.
        for _ in range(MOST_TRIES):
            try:
                answer = await stub.StartBulkOperation(
                    admin_pb2.StartBulkOperationRequest(
                        filter=admin_pb2.BulkFilter(namespace_pattern=ns),
                        action=admin_pb2.BULK_ACTION_REPLAY,
                        reason="fill the cap",
                        rate=0.1,
                    ),
                    metadata=operator,
                )
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc.details()
                break
            started.append(answer.operation.id)
        else:
            raise AssertionError(f"{MOST_TRIES} starts and no cap")
        async with signed_in(rig, rig.tokens.operator) as (http, csrf):
            status, page = await post(http, rig, "/bulk/start", {**form_of(ns, csrf, rate="1"), "confirmed": "1"})
        assert status == 429, page
        # The token's cap (4), or the deployment's should other tests' operations fill it first.
        assert "Refused: " in page and "bulk operations" in page and "running" in page, page
        assert "INBOXD_BULK_MAX_RUNNING" in page, page
        assert {o.id for o in await operations_on(rig, ns)} == set(started), "the refused start left one behind"
    finally:
        for op_id in started:
            await stub.CancelBulkOperation(
                admin_pb2.CancelBulkOperationRequest(id=op_id, reason="test over"), metadata=operator
            )
