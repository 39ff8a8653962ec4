"""The operators' console in a real headless Chromium, against a real inboxd on a real PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from aiohttp import web
from playwright.async_api import BrowserContext, Page, expect

from inboxd_client.v1 import types_pb2
from tests.console.rig import Rig
from tests.harness import REPO

SESSION = "inboxd_console_session"
# Screenshots for the README: kept under docs/ when INBOXD_UPDATE_SCREENSHOTS=1, else in the test's tmp dir.
SCREENSHOTS = REPO / "docs"


def screenshot_path(name: str, tmp_path: Path) -> Path:
    return (SCREENSHOTS if os.environ.get("INBOXD_UPDATE_SCREENSHOTS") == "1" else tmp_path) / name


async def sign_in(page: Page, token: str) -> None:
    """With the keyboard only: the token field has focus, Enter submits."""
    await page.goto("/overview")
    await expect(page).to_have_url("/signin")
    await expect(page.get_by_label("Token")).to_be_focused()
    await page.keyboard.type(token)
    async with page.expect_navigation():
        await page.keyboard.press("Enter")


async def test_operator_replays_a_dead_letter_with_a_reason_and_sees_it_pending(
    rig: Rig, page: Page, tmp_path: Path
) -> None:
    ns, mail = f"{rig.shop}/stripe", f"{rig.shop}/mailera"
    for key in ("msg_1", "msg_2", "msg_3"):
        await rig.accept(mail, key, event_type="message.received")
    await rig.claim(mail, "message.received")
    await rig.accept(ns, "evt_ok", event_type="charge.succeeded")
    await rig.dead_letter(ns, "evt_card_declined", error="KeyError: 'amount' in handler for charge.refunded")
    # The same key again with another payload: kept aside as a conflicting copy.
    await rig.accept(
        ns, "evt_card_declined", payload={"id": "evt_card_declined", "amount": 1200}, event_type="charge.refunded"
    )

    await sign_in(page, rig.tokens.operator)
    await expect(page).to_have_url("/overview")
    await expect(page.get_by_text("Signed in as")).to_contain_text("ops-oncall")
    row = page.get_by_role("row").filter(has_text=ns)
    await expect(row.get_by_role("link", name="1", exact=True)).to_be_visible()
    await page.screenshot(path=screenshot_path("console-overview.png", tmp_path), full_page=True)

    await row.get_by_role("link", name="1", exact=True).click()
    await expect(page).to_have_url(f"/dead-letters?namespace={ns.replace('/', '%2F')}")
    await page.get_by_role("link", name="evt_card_declined").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Event evt_card_declined")
    await expect(page.locator(".facts")).to_contain_text("DEAD_LETTERED")
    await expect(page.get_by_role("table", name="Claims ledger, oldest first")).to_contain_text("worker-7")
    await expect(page.get_by_role("table", name="Action ledger")).to_contain_text("send-receipt:v1")
    await expect(page.get_by_role("region", name="Conflicting copies", exact=True)).to_contain_text("hidden")

    await page.get_by_label("Reason").fill("amount parser fixed in 1.4.2")
    await page.get_by_role("button", name="Replay this event").click()
    await expect(page.get_by_role("status")).to_have_text(
        "Replayed 1 of 1 events, reason: amount parser fixed in 1.4.2."
    )

    await page.get_by_role("link", name="evt_card_declined").click()
    await expect(page.locator(".facts")).to_contain_text("PENDING")
    replays = page.get_by_role("table", name="Replays: who and why")
    await expect(replays).to_contain_text("ops-oncall")
    await expect(replays).to_contain_text("amount parser fixed in 1.4.2")
    await expect(replays).to_contain_text("DEAD_LETTERED")
    await page.screenshot(path=screenshot_path("console-event.png", tmp_path), full_page=True)

    # The audit row the admin API reads names the token that signed in.
    stored = await rig.event(ns, "evt_card_declined")
    assert stored.summary.state == types_pb2.EVENT_STATE_PENDING
    assert [(r.actor, r.reason) for r in stored.replays] == [("ops-oncall", "amount parser fixed in 1.4.2")]


async def test_several_dead_letters_are_replayed_at_once_and_each_result_shown(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/bulk"
    for key in ("evt_a", "evt_b", "evt_c"):
        await rig.dead_letter(ns, key)
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/dead-letters?namespace={ns}")
    await page.get_by_label("Select every event on this page").check()
    await page.get_by_label(f"Select {ns} evt_b").uncheck()
    await page.get_by_label("Reason").fill("downstream outage over")
    await page.get_by_role("button", name="Replay selected").click()
    await expect(page.get_by_role("status")).to_contain_text("Replayed 2 of 2 events")
    results = page.get_by_role("table", name="Replay results")
    await expect(results.get_by_role("row").filter(has_text="evt_a")).to_contain_text("now PENDING")
    await expect(results.get_by_role("row").filter(has_text="evt_c")).to_contain_text("now PENDING")
    states = {key: (await rig.event(ns, key)).summary.state for key in ("evt_a", "evt_b", "evt_c")}
    assert states == {
        "evt_a": types_pb2.EVENT_STATE_PENDING,
        "evt_b": types_pb2.EVENT_STATE_DEAD_LETTERED,
        "evt_c": types_pb2.EVENT_STATE_PENDING,
    }


async def test_a_worker_scoped_token_cannot_sign_in(rig: Rig, page: Page, context: BrowserContext) -> None:
    await sign_in(page, rig.tokens.worker)
    await expect(page.get_by_role("alert")).to_have_text("token 'worker-shop' lacks the 'admin' scope")
    assert [c["name"] for c in await context.cookies() if c["name"] == SESSION] == []
    await page.goto("/overview")
    await expect(page).to_have_url("/signin")


async def test_an_unknown_token_cannot_sign_in(rig: Rig, page: Page) -> None:
    await sign_in(page, "ibx_not-a-token")
    await expect(page.get_by_role("alert")).to_have_text("unknown bearer token")


async def test_the_session_cookie_is_httponly_and_samesite_strict(
    rig: Rig, page: Page, context: BrowserContext
) -> None:
    await sign_in(page, rig.tokens.operator)
    await expect(page).to_have_url("/overview")
    (cookie,) = [c for c in await context.cookies() if c["name"] == SESSION]
    assert rig.tokens.operator not in cookie["value"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""


async def test_signing_out_ends_the_session(rig: Rig, page: Page, context: BrowserContext) -> None:
    await sign_in(page, rig.tokens.operator)
    await expect(page).to_have_url("/overview")
    kept = await context.cookies()  # every cookie the console set, whatever it is named
    assert kept
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url("/signin")
    assert [c for c in await context.cookies() if c["name"] == SESSION] == []
    await page.goto("/dead-letters")
    await expect(page).to_have_url("/signin")
    # The cookie put back (a copy kept anywhere): the session it named is over on the server.
    await context.add_cookies(kept)  # type: ignore[arg-type]
    await page.goto("/dead-letters")
    await expect(page).to_have_url("/signin")


async def test_the_cookie_another_port_of_this_host_receives_holds_no_token(
    rig: Rig, page: Page, context: BrowserContext
) -> None:
    """Browsers send a host's cookies to each of its ports: what ours hold must be worth nothing there."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie", ""))
        return web.Response(text="another service")

    app = web.Application()
    app.router.add_get("/", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        await sign_in(page, rig.tokens.operator)
        await expect(page).to_have_url("/overview")
        await page.goto(f"http://127.0.0.1:{runner.addresses[0][1]}/")
        assert seen, "the other service was not asked"
        assert rig.tokens.operator not in seen[0], "the bearer token went to another port"
        assert SESSION in seen[0], seen
    finally:
        await runner.cleanup()


async def test_a_token_removed_from_the_tokens_file_is_refused_at_its_next_click(rig: Rig, page: Page) -> None:
    await sign_in(page, rig.tokens.operator)
    await expect(page).to_have_url("/overview")
    kept = rig.tokens.file.read_text()
    entries = kept.split("[[token]]")
    rig.tokens.file.write_text("[[token]]".join(e for e in entries if '"ops-oncall"' not in e))
    try:
        rig.registry.reload()  # what SIGHUP does
        await page.get_by_role("link", name="Events").click()
        await expect(page).to_have_url("/signin")
    finally:
        rig.tokens.file.write_text(kept)
        rig.registry.reload()


async def test_a_post_without_the_csrf_token_is_refused(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/payments"
    await rig.dead_letter(ns, "evt_csrf")
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/dead-letters?namespace={ns}")
    ref = await page.get_by_label(f"Select {ns} evt_csrf").get_attribute("value")
    assert ref
    # The browser's own cookies go along, as they would with a forged cross-site form.
    answer = await page.request.post("/replay", form={"event": ref, "reason": "forged"})
    assert answer.status == 403
    assert "CSRF token is missing or wrong" in await answer.text()
    wrong = await page.request.post("/replay", form={"event": ref, "reason": "forged", "csrf": "0" * 64})
    assert wrong.status == 403
    assert (await rig.event(ns, "evt_csrf")).summary.state == types_pb2.EVENT_STATE_DEAD_LETTERED
    # The page's own form, with its token, goes through.
    await page.get_by_label(f"Select {ns} evt_csrf").check()
    await page.get_by_label("Reason").fill("the real one")
    await page.get_by_role("button", name="Replay selected").click()
    await expect(page.get_by_role("status")).to_contain_text("Replayed 1 of 1 events")


async def test_another_tenants_namespace_never_appears(rig: Rig, page: Page) -> None:
    theirs = f"{rig.other}/stripe"
    await rig.dead_letter(theirs, "evt_theirs")
    await rig.dead_letter(f"{rig.shop}/orders", "evt_ours")
    await sign_in(page, rig.tokens.operator)
    for path in ("/overview", "/events", "/dead-letters", "/events?type=charge.succeeded"):
        await page.goto(path)
        await expect(page.locator("main")).to_contain_text(rig.shop)
        assert rig.other not in await page.content(), f"{path} shows the other tenant"
    for path in (f"/events?namespace={theirs}", f"/event?namespace={theirs}&key=evt_theirs"):
        refused = await page.goto(path)
        assert refused is not None and refused.status == 403
        await expect(page.get_by_role("alert")).to_contain_text("is not granted namespace")
    answer = await page.request.post(
        "/replay",
        form={"event": "x", "reason": "r", "csrf": await page.locator("input[name=csrf]").first.input_value()},
    )
    assert answer.status == 400


async def test_the_payload_is_sent_only_after_an_explicit_click(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/stripe"
    await rig.accept(ns, "evt_secret", payload={"card_holder": "Ada Lovelace"})
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/event?namespace={ns}&key=evt_secret")
    assert "Ada Lovelace" not in await page.content()
    await page.get_by_role("link", name="Show payload").click()
    await expect(page.locator("pre.payload")).to_contain_text('"card_holder": "Ada Lovelace"')


async def test_events_filter_by_type_and_key_prefix_and_page_by_keyset(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/many"
    for i in range(55):
        await rig.accept(ns, f"inv_{i:03}", event_type="invoice.paid")
    await rig.accept(ns, "cus_1", event_type="customer.created")
    await sign_in(page, rig.tokens.operator)
    await page.goto("/events")
    await page.get_by_label("Namespace").select_option(ns)
    await page.get_by_label("Type").fill("invoice.paid")
    await page.get_by_label("Key prefix").fill("inv_")
    await page.get_by_role("button", name="Filter").click()
    listing = page.get_by_role("table", name="Events, newest first")
    await expect(listing.locator("tbody tr")).to_have_count(50)
    await expect(listing).not_to_contain_text("cus_1")
    await page.get_by_role("link", name="Next page").click()
    await expect(listing.locator("tbody tr")).to_have_count(5)
    await expect(listing.locator("tbody tr").last).to_contain_text("inv_000")
    assert "page=p1." in page.url
    await expect(page.get_by_role("link", name="Next page")).to_have_count(0)


async def test_the_overview_updates_itself_without_a_reload(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/live"
    await rig.dead_letter(ns, "evt_1")
    await sign_in(page, rig.tokens.operator)
    row = page.get_by_role("row").filter(has_text=ns)
    await expect(row.get_by_role("link", name="1", exact=True)).to_be_visible()
    await page.evaluate("window.stillTheSamePage = true")
    await rig.dead_letter(ns, "evt_2")
    await expect(row.get_by_role("link", name="2", exact=True)).to_be_visible(timeout=15_000)
    assert await page.evaluate("window.stillTheSamePage") is True


@pytest.mark.parametrize("width", [360])
async def test_pages_fit_a_phone_screen(rig: Rig, context: BrowserContext, width: int) -> None:
    ns, key = f"{rig.shop}/phone", "evt_a_rather_long_key_that_would_push_a_page_wider_than_a_phone_screen"
    await rig.dead_letter(ns, key)
    # A payload shown as a hex dump and one as a form: wide <pre> lines and long values.
    await rig.accept(ns, "bin", bytes(range(256)), content_type="application/octet-stream")
    await rig.accept(ns, "form", b"text=" + b"x" * 300 + b"&a=1", content_type="application/x-www-form-urlencoded")
    phone = await context.new_page()
    await phone.set_viewport_size({"width": width, "height": 780})
    await sign_in(phone, rig.tokens.operator)
    pages = (
        "/overview", "/events", "/events?state=processing", "/dead-letters", f"/event?namespace={ns}&key={key}",
        f"/unresolved?namespace={ns}", "/trends", f"/event?namespace={ns}&key=bin&payload=1",
        f"/event?namespace={ns}&key=form&payload=1", "/flow", "/bulk",
    )  # fmt: skip
    for path in pages:
        await phone.goto(path)
        overflow = await phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than a {width}px screen"


async def _tab_through(page: Page, times: int) -> list[str]:
    reached = []
    for _ in range(times):
        await page.keyboard.press("Tab")
        reached.append(await page.evaluate("(e => e.getAttribute('href') || e.textContent)(document.activeElement)"))
    return reached


async def test_the_keyboard_reaches_the_navigation_and_skips_to_the_content(rig: Rig, page: Page) -> None:
    await rig.accept(f"{rig.shop}/keys", "evt_1")
    await sign_in(page, rig.tokens.operator)
    await expect(page).to_have_url("/overview")
    navigation = await _tab_through(page, 11)
    assert navigation == [
        "#main", "/overview", "/overview", "/trends", "/events", "/dead-letters", "/flow", "/bulk", "/subscriptions",
        "/destinations", "Sign out",
    ], navigation  # fmt: skip
    await page.goto("/overview")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()
    # The table's scrolling region, then its first namespace link.
    assert (await _tab_through(page, 2))[1].startswith("/events?namespace="), "the skip link skipped nothing"
    await page.goto("/overview")
    await page.get_by_role("link", name=f"{rig.shop}/keys").focus()
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Events")
    await expect(page.get_by_label("Namespace")).to_have_value(f"{rig.shop}/keys")


async def test_a_form_body_is_shown_as_a_table_of_its_fields_after_the_click(
    rig: Rig, page: Page, tmp_path: Path
) -> None:
    ns = f"{rig.shop}/slack"
    body = b"command=%2Fdeploy&text=api+v2&user_name=ada&text=again"
    await rig.accept(ns, "cmd_1", body, event_type="slash.command", content_type="application/x-www-form-urlencoded")
    await sign_in(page, rig.tokens.operator)
    await page.goto(f"/event?namespace={ns}&key=cmd_1")
    await expect(page.locator(".facts")).to_contain_text("application/x-www-form-urlencoded")
    assert "api v2" not in await page.content()
    await page.get_by_role("link", name="Show payload").click()
    fields = page.get_by_role("table", name="Form fields")
    await expect(fields.locator("tbody tr")).to_have_text(["command/deploy", "textapi v2", "user_nameada", "textagain"])
    await expect(page.locator(".payload-about")).to_contain_text("shown as form fields")
    await page.locator("#payload").scroll_into_view_if_needed()
    await (
        page.locator("section")
        .filter(has=page.locator("#payload"))
        .screenshot(path=screenshot_path("console-form-payload.png", tmp_path))
    )
