"""The console says why an event is where it is, in a real headless Chromium: who holds it, and what it waits behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.async_api import Page, expect

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.console.rig import Rig
from tests.console.test_console_browser import screenshot_path, sign_in


async def test_the_processing_list_shows_the_worker_the_lease_expiry_and_the_attempt(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/held"
    await rig.accept(ns, "evt_held")
    await rig.claim(ns, "charge.succeeded", worker="worker-gone")
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/events?namespace={ns}&state=processing")
    listing = page.get_by_role("table", name="Events, newest first")
    await expect(listing.get_by_role("columnheader")).to_contain_text(["Worker", "Lease expires", "Attempt"])
    row = listing.get_by_role("row").filter(has_text="evt_held")
    await expect(row).to_contain_text("worker-gone")
    await expect(row.locator("time")).to_have_count(2)  # the lease's expiry and the acceptance


async def test_an_event_blocked_by_its_ordering_key_links_to_the_event_holding_the_key(
    rig: Rig, page: Page, tmp_path: Path
) -> None:
    ns = f"{rig.shop}/keyed"
    # Both share an ordering key: the first is claimed and holds it.
    await rig.accept_keyed(ns, "evt_k1", "cart-1")
    await rig.accept_keyed(ns, "evt_k2", "cart-1")
    await rig.claim(ns, "cart.updated", worker="worker-slow")
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/event?namespace={ns}&key=evt_k2")
    await expect(page.locator(".facts")).to_contain_text("Waits behind")
    await page.screenshot(path=screenshot_path("console-blocked-event.png", tmp_path), full_page=True)
    await page.locator("#blocked-by").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Event evt_k1")
    await expect(page.locator(".facts")).to_contain_text("PROCESSING")
    await expect(page.locator(".facts")).not_to_contain_text("Waits behind")


async def test_the_overview_shows_blocked_keys_and_links_processing_to_who_holds_them(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/blocked-overview"
    await rig.accept_keyed(ns, "evt_k1", "cart-2")
    await rig.accept_keyed(ns, "evt_k2", "cart-2")
    await rig.claim(ns, "cart.updated", worker="worker-stuck")
    await sign_in(page, rig.tokens.operator)
    overview = page.get_by_role("table", name="Events per namespace")
    await expect(overview.get_by_role("columnheader")).to_contain_text(["Blocked keys", "Oldest blocked"])
    row = overview.get_by_role("row").filter(has_text=ns)
    # pending, processing, completed, dead, oldest claimable, unresolved, blocked keys
    await expect(row.get_by_role("cell").nth(7)).to_have_text("1")
    await row.get_by_role("link", name="1", exact=True).click()
    await expect(page.get_by_role("table", name="Events, newest first")).to_contain_text("worker-stuck")


async def test_unresolved_actions_link_from_the_overview_to_their_events(rig: Rig, page: Page, tmp_path: Path) -> None:
    ns = f"{rig.shop}/unsure"
    await rig.accept(ns, "evt_timed_out", event_type="mail.send")
    claim = await rig.claim(ns, "mail.send")
    fence: dict[str, Any] = {"namespace": ns, "event_key": "evt_timed_out", "claim_token": claim.claim_token}
    auth = [("authorization", f"Bearer {rig.tokens.root}")]
    stub = inbox_pb2_grpc.InboxServiceStub(rig.channel)
    await stub.RecordActionOutcome(
        inbox_pb2.RecordActionOutcomeRequest(**fence, action="send:v1", state=types_pb2.ACTION_STATE_UNKNOWN),
        metadata=auth,
    )
    await stub.Fail(inbox_pb2.FailRequest(**fence, error="ActionUnresolved", permanent=True), metadata=auth)
    await sign_in(page, rig.tokens.operator)
    row = page.get_by_role("table", name="Events per namespace").get_by_role("row").filter(has_text=ns)
    await expect(row).to_be_visible()
    # By now this module's namespaces show a held key, a dead worker's claim and an unresolved send.
    await page.screenshot(path=screenshot_path("console-overview-stuck.png", tmp_path), full_page=True)
    await row.get_by_role("cell").nth(6).get_by_role("link", name="1").click()
    listing = page.get_by_role("table", name="Unresolved actions, oldest first")
    await expect(listing).to_contain_text("send:v1")
    await expect(listing).to_contain_text("UNKNOWN")
    await page.screenshot(path=screenshot_path("console-unresolved.png", tmp_path), full_page=True)
    await listing.get_by_role("link", name="evt_timed_out").click()
    await expect(page.get_by_role("button", name="Settle send:v1")).to_be_visible()
