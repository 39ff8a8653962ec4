"""The console's overview counts the workers connected per namespace, from the live Work streams of every process."""

from __future__ import annotations

import grpc
from playwright.async_api import Page, expect

from inboxd_client.v1 import inbox_pb2_grpc
from tests.console.rig import Rig
from tests.console.test_console_browser import sign_in
from tests.integration.test_auth import bearer
from tests.integration.work_streams import Worker


async def test_the_overview_shows_the_workers_connected_per_namespace(rig: Rig, page: Page) -> None:
    ns, quiet = f"{rig.shop}/streamed", f"{rig.shop}/unstreamed"
    for namespace in (ns, quiet):
        await rig.accept(namespace, "evt_1")
    stub = inbox_pb2_grpc.InboxServiceStub(rig.channel)
    workers = [Worker(stub, metadata=bearer(rig.tokens.worker)) for _ in range(2)]
    for worker, name in zip(workers, ("mailer-1", "mailer-2"), strict=True):
        await worker.subscribe([ns], worker_id=name)
    assert rig.server.presence is not None
    await rig.server.presence.write_now()  # the process's turn to write, without waiting a period
    await sign_in(page, rig.tokens.operator)
    overview = page.get_by_role("table", name="Events per namespace")
    await expect(overview.get_by_role("columnheader").last).to_have_text("Workers")
    row = overview.get_by_role("row").filter(has_text=ns)
    await expect(row.get_by_role("cell").last).to_have_text("2")
    unstreamed = overview.get_by_role("row").filter(has_text=quiet)
    await expect(unstreamed.get_by_role("cell").last).to_have_text("0")
    for worker in workers:
        assert await worker.close() == grpc.StatusCode.OK
    await rig.server.presence.write_now()
    await page.reload()
    await expect(overview.get_by_role("row").filter(has_text=ns).get_by_role("cell").last).to_have_text("0")
