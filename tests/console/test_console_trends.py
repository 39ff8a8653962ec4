"""The console's trends page in a real headless Chromium: each namespace's minutes, drawn and said in words."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, Page, expect

from inboxd.background.trends import write_tally
from inboxd.domain.trends import TRENDS_WINDOW, MinuteCounts
from inboxd.store.trends import record_ages_alone, record_counts
from tests.console.rig import Rig
from tests.console.test_console_browser import screenshot_path, sign_in

HISTORY_MINUTES = 90


async def write_this_minute(rig: Rig) -> None:
    """What the server counted so far, written now as its periodic writer would."""
    ops = rig.server.ops
    assert ops is not None
    await write_tally(rig.server.inbox, ops.trends)


async def record_age(rig: Rig, ns: str, seconds: float, at: datetime | None) -> None:
    """One minute's age of `ns`, recorded under the trends lock (the session's other servers take it too)."""

    async def ages() -> list[tuple[str, float]]:
        return [(ns, seconds)]

    for _ in range(100):
        if await record_ages_alone(rig.server.inbox.db.conninfo, ages, window=TRENDS_WINDOW, now=at):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("another replica held the trends lock for 5 s")


async def seed_history(rig: Rig, ns: str) -> None:
    """The past hours of a busy namespace, minute by minute, through the store's own writes."""
    now = datetime.now(UTC)
    db = rig.server.inbox.db
    for back in range(HISTORY_MINUTES, 0, -1):
        at = now - timedelta(minutes=back)
        wave = 20 + 15 * math.sin(back / 12)
        stuck = 40 < back < 70  # a worker outage: completions stop, the backlog ages
        counts = [
            MinuteCounts(
                ns, accepted=int(wave), completed=0 if stuck else int(wave), dead_lettered=1 if back % 37 == 0 else 0
            )
        ]
        await db.run(lambda conn, c=counts, t=at: record_counts(conn, c, now=t), transaction=False)  # type: ignore[misc]
        await record_age(rig, ns, (70 - back) * 60.0 if stuck else 2.0, at)


async def test_the_trends_page_draws_each_namespace_and_says_its_numbers(rig: Rig, page: Page, tmp_path: Path) -> None:
    busy, quiet = f"{rig.shop}/stripe", f"{rig.shop}/mailer"
    await seed_history(rig, busy)
    await rig.accept(busy, "evt_now")  # the page charts the namespaces that have events
    for key in ("evt_1", "evt_2", "evt_3"):
        await rig.accept(quiet, key)
    await rig.dead_letter(quiet, "evt_bad")
    await rig.accept(rig.other, "evt_rival")
    await write_this_minute(rig)
    # A minute ago: the session's other servers record this minute's ages of every namespace too.
    await record_age(rig, quiet, 42.0, datetime.now(UTC) - timedelta(minutes=1))

    await sign_in(page, rig.tokens.operator)
    await page.get_by_role("main").get_by_role("link", name="Trends").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Trends")
    section = page.get_by_role("region", name=f"Trends of {quiet}")
    await expect(section.locator("svg")).to_have_count(4)
    charts: list[Any] = await section.locator("svg title").all_text_contents()
    assert charts[0].startswith("Accepted per minute over the last 6 hours: 4 in all, peak 4/min at "), charts[0]
    # (Which minute it is the last of depends on whether the clock passed a minute since the write.)
    assert "last minute " in charts[0]
    assert charts[1].startswith("Completed per minute over the last 6 hours: 0 in all"), charts[1]
    assert "Dead-lettered per minute over the last 6 hours: 1 in all" in charts[2]
    assert charts[3].startswith("Oldest claimable age over the last 6 hours: now "), charts[3]
    assert charts[3].endswith(", worst 42s")
    await expect(section).to_contain_text("4 in all, peak 4/min")
    busy_section = page.get_by_role("region", name=f"Trends of {busy}")
    await expect(busy_section.locator("svg path.line")).to_have_count(4)
    await expect(busy_section).to_contain_text("worst 29m0s")
    # Another tenant's namespace is not the operator's to see.
    await expect(page.get_by_role("main")).not_to_contain_text(rig.other)
    await page.screenshot(path=screenshot_path("console-trends.png", tmp_path), full_page=True)

    answer = await page.goto(f"/trends?namespace={rig.other}")
    assert answer is not None and answer.status == 403
    await page.goto(f"/trends?namespace={quiet}")
    await expect(page.get_by_role("region")).to_have_count(1)


async def test_the_trends_page_fits_a_phone_screen(rig: Rig, context: BrowserContext, tmp_path: Path) -> None:
    ns = f"{rig.shop}/a-rather-long-namespace-name-that-would-push-a-phone-screen-wide"
    await rig.accept(ns, "evt_1")
    await write_this_minute(rig)
    phone = await context.new_page()
    await phone.set_viewport_size({"width": 360, "height": 780})
    await sign_in(phone, rig.tokens.operator)
    await phone.goto(f"/trends?namespace={ns}")
    charts = phone.get_by_role("region", name=f"Trends of {ns}").locator("svg")
    await expect(charts).to_have_count(4)
    overflow = await phone.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"/trends is {overflow}px wider than a 360px screen"
    # One chart a row, as wide as the screen allows.
    box = await charts.first.bounding_box()
    assert box is not None and box["width"] > 250
    await phone.goto("/trends")
    await phone.screenshot(path=screenshot_path("console-trends-phone.png", tmp_path), full_page=False)
