"""The event page's acts in a real headless Chromium: settle an action, end a claim, discard; audited, fenced."""

from __future__ import annotations

from playwright.async_api import Page, expect

from inboxd.console.pages import event_ref
from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc, types_pb2
from tests.console.rig import Rig
from tests.console.test_console_browser import sign_in


async def open_event(page: Page, ns: str, key: str) -> None:
    await page.goto(f"/event?namespace={ns}&key={key}")
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Event {key}")


async def test_an_operator_settles_an_abandoned_action_and_sees_it_succeeded_and_audited(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/receipts"
    await rig.dead_letter(ns, "evt_settle")  # its send-receipt:v1 was left INTENDED by the dead claim
    await sign_in(page, rig.tokens.operator)
    await open_event(page, ns, "evt_settle")
    await page.get_by_label("Outcome of send-receipt:v1").select_option("succeeded")
    await page.get_by_label("External reference of send-receipt:v1").fill("rcpt_991")
    await page.get_by_label("What you found, and where, for send-receipt:v1").fill("in the mailer's log")
    await page.get_by_role("button", name="Settle send-receipt:v1").click()

    await expect(page.get_by_role("status")).to_have_text("Settled send-receipt:v1 as SUCCEEDED.")
    await expect(page.get_by_role("table", name="Action ledger")).to_contain_text("rcpt_991")
    audit = page.get_by_role("table", name="Operator actions: who, why, before and after")
    await expect(audit).to_contain_text("ops-oncall")
    await expect(audit).to_contain_text("in the mailer's log")
    # Settled: no settle form is offered for it any more.
    await expect(page.get_by_role("button", name="Settle send-receipt:v1")).to_have_count(0)
    [action] = (await rig.event(ns, "evt_settle")).actions
    assert (action.state, action.external_ref) == (types_pb2.ACTION_STATE_SUCCEEDED, "rcpt_991")


async def test_ending_a_claim_that_moved_on_shows_the_refusal_and_the_event_as_it_stands(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/orders-end"
    await rig.accept(ns, "evt_held")
    claim = await rig.claim(ns, "charge.succeeded", worker="worker-gone")
    await sign_in(page, rig.tokens.operator)
    await open_event(page, ns, "evt_held")
    await page.get_by_label("Why end it").fill("worker pod deleted")
    # Meanwhile the worker was alive after all, and completed it.
    fence = {"namespace": ns, "event_key": "evt_held", "claim_token": claim.claim_token}
    await inbox_pb2_grpc.InboxServiceStub(rig.channel).Complete(
        inbox_pb2.CompleteRequest(**fence), metadata=[("authorization", f"Bearer {rig.tokens.root}")]
    )
    await page.get_by_role("button", name="End this claim").click()
    await expect(page.get_by_role("alert")).to_contain_text("Refused: the event is COMPLETED")
    await expect(page.locator(".facts")).to_contain_text("COMPLETED")
    assert list((await rig.event(ns, "evt_held")).operator_actions) == []


async def test_an_operator_ends_a_dead_workers_claim_and_the_event_is_pending_at_once(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/orders-dead"
    await rig.accept(ns, "evt_dead_worker")
    await rig.claim(ns, "charge.succeeded", worker="worker-gone")
    await sign_in(page, rig.tokens.operator)
    await open_event(page, ns, "evt_dead_worker")
    await page.get_by_label("Count the ended claim as an attempt").check()
    await page.get_by_label("Why end it").fill("node lost")
    await page.get_by_role("button", name="End this claim").click()
    await expect(page.get_by_role("status")).to_contain_text("the event is PENDING, its attempt counted")
    await expect(page.locator(".facts")).to_contain_text("PENDING")
    await expect(page.get_by_role("table", name="Claims ledger, oldest first")).to_contain_text("ended")
    # PENDING now: the page offers Discard instead.
    await expect(page.get_by_role("button", name="Discard this event")).to_be_visible()


async def test_an_operator_discards_an_event_and_a_forged_or_foreign_discard_is_refused(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/staging-leak"
    await rig.accept(ns, "evt_test_traffic")
    await rig.accept(f"{rig.other}/stripe", "evt_theirs")
    await sign_in(page, rig.tokens.operator)
    await open_event(page, ns, "evt_test_traffic")
    ref = await page.locator("form[action='/discard'] input[name=event]").get_attribute("value")
    assert ref
    forged = await page.request.post("/discard", form={"event": ref, "expected_state": "pending", "reason": "x"})
    assert forged.status == 403 and "CSRF token is missing or wrong" in await forged.text()
    assert (await rig.event(ns, "evt_test_traffic")).summary.state == types_pb2.EVENT_STATE_PENDING

    await page.get_by_label("Why it should never run").fill("test traffic from staging")
    await page.get_by_role("button", name="Discard this event").click()
    await expect(page.get_by_role("status")).to_have_text("Discarded: the event is COMPLETED as IGNORED.")
    await expect(page.locator(".facts")).to_contain_text("test traffic from staging")
    stored = await rig.event(ns, "evt_test_traffic")
    assert (stored.summary.state, stored.disposition) == (
        types_pb2.EVENT_STATE_COMPLETED,
        types_pb2.DISPOSITION_IGNORED,
    )

    # With the page's own CSRF token, another tenant's event is still not this operator's to discard.
    csrf = await page.locator("input[name=csrf]").first.input_value()
    theirs = event_ref(f"{rig.other}/stripe", "evt_theirs")
    foreign = await page.request.post(
        "/discard", form={"event": theirs, "expected_state": "pending", "reason": "x", "csrf": csrf}
    )
    assert foreign.status == 403
