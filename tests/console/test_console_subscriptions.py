"""The console's subscriptions page over HTTP and in Chromium: create, see the copies made, delete, refusals.

Against a real inboxd on a real PostgreSQL: events are accepted through the
inbox API and the copies read back through the admin API.
"""

from __future__ import annotations

import uuid

import aiohttp
from playwright.async_api import Page, expect

from tests.console.rig import Rig, cookie_jar, http_sign_in, page_csrf
from tests.console.test_console_browser import sign_in


async def test_an_operator_creates_a_subscription_sees_its_copy_and_deletes_it_in_chromium(
    rig: Rig, page: Page
) -> None:
    name, origin = f"{rig.shop}/billing-{uuid.uuid4().hex[:6]}", f"{rig.shop}/orders"
    await sign_in(page, rig.tokens.operator)
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Subscriptions").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Subscriptions")
    await page.get_by_label("Subscriber (name)").fill(name)
    await page.get_by_label("Namespace or pattern").fill(origin)
    await page.get_by_label("Why create it").fill("billing needs every order")
    await page.get_by_role("button", name="Create subscription").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Created {name}")
    table = page.get_by_role("table", name="Subscriptions, by name")
    await expect(table).to_contain_text(origin)

    key = f"ord_{uuid.uuid4().hex[:6]}"
    await rig.accept(origin, key)
    copy = await rig.event(f"{name}/{origin}", key)
    assert copy.summary.event_key == key

    row = table.get_by_role("row").filter(has_text=name)
    await row.get_by_label("Why delete it").fill("billing moved")
    await row.get_by_role("button", name=f"Delete {name}").click()
    await expect(page.get_by_role("status")).to_have_text(f"Deleted {name}; the copies it made stay.")
    assert not await page.get_by_role("row").filter(has_text=name).count()


async def test_a_subscription_beyond_the_sessions_grants_is_refused_in_words(rig: Rig) -> None:
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        assert (await http_sign_in(http, rig.base, rig.tokens.operator)).status == 303
        async with http.get(f"{rig.base}/subscriptions") as answer:
            assert answer.status == 200
            csrf = page_csrf(await answer.text())
        form = {"csrf": csrf, "name": f"{rig.shop}/spy", "namespace_pattern": f"{rig.other}/*", "reason": "peek"}
        async with http.post(f"{rig.base}/subscriptions/create", data=form, allow_redirects=False) as answer:
            assert answer.status == 403
            assert "Refused: token" in await answer.text()
        form = {"csrf": csrf, "name": "x*y", "namespace_pattern": f"{rig.shop}/a", "reason": "r"}
        async with http.post(f"{rig.base}/subscriptions/create", data=form, allow_redirects=False) as answer:
            assert answer.status == 400
            assert "Refused: name:" in await answer.text()
