"""The console's flow-control page over HTTP and in Chromium: the rules with live figures, pause and resume, refusals.

Against a real inboxd on a real PostgreSQL: rules are set and read back
through the admin API (SetFlowControl, GetFlowControl), events are accepted
and claimed through the inbox API, and the page is what the console serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import aiohttp
from playwright.async_api import Page, expect

from inboxd.console.flow_page import in_flight_words, ramp_in_progress, rate_words, state_words
from inboxd.domain.flow_rules import FlowControl, FlowFigures, FlowRule
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, inbox_pb2, inbox_pb2_grpc
from tests.console.rig import Rig, cookie_jar, http_sign_in, page_csrf
from tests.console.test_console_browser import sign_in


def _admin(rig: Rig) -> admin_pb2_grpc.InboxAdminServiceStub:
    return admin_pb2_grpc.InboxAdminServiceStub(rig.channel)


def _root(rig: Rig) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {rig.tokens.root}")]


async def set_rule(rig: Rig, pattern: str, **fields: object) -> None:
    request = admin_pb2.SetFlowControlRequest(pattern=pattern, reason="test setup", **fields)  # type: ignore[arg-type]
    await _admin(rig).SetFlowControl(request, metadata=_root(rig))


async def rule_of(rig: Rig, namespace: str) -> admin_pb2.GetFlowControlResponse:
    answer: admin_pb2.GetFlowControlResponse = await _admin(rig).GetFlowControl(
        admin_pb2.GetFlowControlRequest(namespace=namespace), metadata=_root(rig)
    )
    return answer


async def claim_some(rig: Rig, ns: str, count: int) -> None:
    answer = await inbox_pb2_grpc.InboxServiceStub(rig.channel).Claim(
        inbox_pb2.ClaimRequest(namespaces=[ns], max_events=count, worker_id="worker-flow"), metadata=_root(rig)
    )
    assert len(answer.events) == count


@asynccontextmanager
async def signed_in(rig: Rig, token: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A cookie jar signed in with `token`, and the session's CSRF token (from the flow page's forms)."""
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        assert (await http_sign_in(http, rig.base, token)).status == 303
        async with http.get(f"{rig.base}/flow") as answer:
            assert answer.status == 200
            yield http, page_csrf(await answer.text())


async def post(http: aiohttp.ClientSession, rig: Rig, path: str, form: dict[str, str]) -> tuple[int, str]:
    async with http.post(f"{rig.base}{path}", data=form, allow_redirects=False) as answer:
        return answer.status, await answer.text()


def row_of(page: str, pattern: str) -> str:
    """The rules table's row of `pattern`, as HTML."""
    start = page.index(f"<tr><td><code>{pattern}</code></td>")
    return page[start : page.index("</tr>", start)]


async def test_the_page_lists_the_rules_with_in_flight_against_the_limit_and_what_they_hold(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-listed"
    await set_rule(rig, ns, max_in_flight=5, rate=100, burst=20, weight=3)
    for i in range(7):
        await rig.accept(ns, f"evt_{i}")
    await claim_some(rig, ns, 3)
    async with signed_in(rig, rig.tokens.operator) as (http, _):
        async with http.get(f"{rig.base}/flow") as answer:
            page = await answer.text()
    assert '<a href="/flow" aria-current=page>Flow control</a>' in page
    row = row_of(page, ns)
    for shown in ("<td>3</td>", "3 / 5", "100/s, burst 20", "running", "<td>4</td>", "root, <time"):
        assert shown in row, f"{shown!r} not in the row {row!r}"
    assert f"Pause {ns}" in row


async def test_the_namespace_search_shows_which_rule_governs_it(rig: Rig) -> None:
    pattern, ns = f"{rig.shop}/tenants/*", f"{rig.shop}/tenants/acme"
    await set_rule(rig, pattern, max_in_flight=2)
    await rig.accept(ns, "evt_acme")
    async with signed_in(rig, rig.tokens.operator) as (http, _):
        async with http.get(f"{rig.base}/flow", params={"namespace": ns}) as answer:
            page = await answer.text()
        async with http.get(f"{rig.base}/flow", params={"namespace": f"{rig.shop}/ungoverned"}) as answer:
            free = await answer.text()
    assert f"<strong>{ns}</strong> is governed by <code>{pattern}</code>: max_in_flight 2." in page
    assert "PENDING: 1." in page
    assert "test setup" in page  # the rule's change, from the audit
    assert f"No rule governs <strong>{rig.shop}/ungoverned</strong>" in free


async def test_pause_then_resume_with_a_ramp_from_the_page_change_the_rule_and_write_the_audit(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-paused"
    await set_rule(rig, ns, rate=100)
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        status, page = await post(http, rig, "/flow/pause", {"pattern": ns, "reason": "mailer down", "csrf": csrf})
        assert status == 200, page
        assert f"Paused {ns}: it was rate 100/s; it is rate 100/s, paused." in page
        assert "paused" in row_of(page, ns) and f"Resume {ns}" in row_of(page, ns)
        assert (await rule_of(rig, ns)).control.rule.paused

        form = {"pattern": ns, "reason": "mailer back", "ramp_seconds": "600", "ramp_rate": "50", "csrf": csrf}
        status, page = await post(http, rig, "/flow/resume", form)
        assert status == 200, page
        assert "resuming, 0% of 50/s until" in row_of(page, ns)
    answer = await rule_of(rig, ns)
    rule = answer.control.rule
    assert not rule.paused and rule.ramp.ToTimedelta() == timedelta(minutes=10) and rule.ramp_rate == 50
    audit = [(c.actor, c.reason, c.after) for c in answer.changes[:2]]
    assert audit == [
        ("ops-oncall", "mailer back", "rate 100/s, ramp to 50/s over 10m"),
        ("ops-oncall", "mailer down", "rate 100/s, paused"),
    ]


async def test_set_and_remove_a_rule_from_the_page(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-set"
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        form = {"pattern": ns, "max_in_flight": "4", "rate": "", "burst": "", "weight": "2", "reason": "a new tenant"}
        status, page = await post(http, rig, "/flow/set", {**form, "csrf": csrf})
        assert status == 200, page
        assert f"Set {ns}: it was none; it is max_in_flight 4, weight 2." in page
        assert (await rule_of(rig, ns)).control.rule.max_in_flight == 4
        status, page = await post(http, rig, "/flow/remove", {"pattern": ns, "reason": "gone", "csrf": csrf})
        assert status == 200, page
        assert f"Removed {ns}: it was max_in_flight 4, weight 2; it is none." in page
    assert not (await rule_of(rig, ns)).HasField("control")


async def test_a_change_without_its_csrf_token_or_a_reason_is_refused_and_changes_nothing(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-forged"
    await set_rule(rig, ns, max_in_flight=5)
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        status, page = await post(http, rig, "/flow/pause", {"pattern": ns, "reason": "forged"})
        assert status == 403 and "CSRF token is missing or wrong" in page
        status, page = await post(http, rig, "/flow/pause", {"pattern": ns, "reason": " ", "csrf": csrf})
        assert status == 400 and "Refused: reason: is required: say why" in page
        assert "Flow-control rules, most specific first" in page  # the page itself, with the refusal on top
    answer = await rule_of(rig, ns)
    assert not answer.control.rule.paused and [c.reason for c in answer.changes] == ["test setup"]


async def test_rules_beyond_the_sessions_grants_are_neither_shown_nor_changed(rig: Rig) -> None:
    theirs, mine = f"{rig.other}/flow-theirs", f"{rig.shop}/flow-mine"
    await set_rule(rig, theirs, max_in_flight=5)
    await set_rule(rig, mine, max_in_flight=5)
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        async with http.get(f"{rig.base}/flow") as answer:
            listed = await answer.text()
        assert mine in listed and theirs not in listed
        status, page = await post(http, rig, "/flow/pause", {"pattern": theirs, "reason": "x", "csrf": csrf})
        assert status == 403 and "Refused: token &#x27;ops-oncall&#x27; is not granted pattern" in page
        status, page = await post(http, rig, "/flow/set", {"pattern": "*", "weight": "9", "reason": "x", "csrf": csrf})
        assert status == 403, page
        async with http.get(f"{rig.base}/flow", params={"namespace": theirs}) as answer:
            assert answer.status == 403 and "Refused:" in await answer.text()
    assert not (await rule_of(rig, theirs)).control.rule.paused
    listed_all = await _admin(rig).ListFlowControls(admin_pb2.ListFlowControlsRequest(), metadata=_root(rig))
    assert "*" not in [c.rule.pattern for c in listed_all.controls]


async def test_the_use_cases_refusals_are_shown_in_words_never_a_500(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-refusals"
    await set_rule(rig, ns, rate=10)
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        ramp = {"pattern": ns, "reason": "x", "ramp_seconds": "60", "csrf": csrf}
        status, page = await post(http, rig, "/flow/resume", ramp)
        assert status == 409 and "is not paused; only a paused rule resumes with a ramp" in page
        status, page = await post(http, rig, "/flow/set", {"pattern": ns, "max_in_flight": "many", "reason": "x",
                                                          "csrf": csrf})  # fmt: skip
        assert status == 400 and "Refused: max_in_flight: &#x27;many&#x27; is not a whole number" in page
        status, page = await post(http, rig, "/flow/set", {"pattern": ns, "rate": "-1", "reason": "x", "csrf": csrf})
        assert status == 400 and "Refused: rate: is -1.0" in page
        absent = f"{rig.shop}/flow-never"
        status, page = await post(http, rig, "/flow/remove", {"pattern": absent, "reason": "x", "csrf": csrf})
        assert status == 404 and "Refused: no flow-control rule" in page


def test_a_ramp_in_progress_says_how_far_it_has_climbed_and_until_when() -> None:
    start = datetime(2026, 12, 2, 11, 53, tzinfo=UTC)
    rule = FlowRule("mailera/*", rate=100, resumed_at=start, ramp=timedelta(minutes=10), ramp_rate=100)
    assert ramp_in_progress(rule, start + timedelta(minutes=4)) == "resuming, 40% of 100/s until 12:03Z"
    assert state_words(rule, start + timedelta(minutes=10)) == "running"
    assert state_words(FlowRule("mailera/*", paused=True), start) == "paused"


def test_a_patterns_limit_is_shown_as_holding_for_each_namespace_it_governs() -> None:
    figures = FlowFigures(namespaces=3, in_flight=7, pending=40)
    pattern = FlowControl(FlowRule("mailera/*", max_in_flight=5), figures)
    assert in_flight_words(pattern) == "7 / 5 each, over 3 namespaces with open events"
    assert in_flight_words(FlowControl(FlowRule("mailera/acme", max_in_flight=5), figures)) == "7 / 5"
    assert in_flight_words(FlowControl(FlowRule("mailera/acme"), figures)) == "7 / no limit"
    assert rate_words(FlowRule("mailera/*", rate=50)) == "50/s, burst one second's worth"


async def test_an_operator_pauses_a_rule_in_chromium_and_sees_it_paused(rig: Rig, page: Page) -> None:
    ns = f"{rig.shop}/flow-browser"
    await set_rule(rig, ns, max_in_flight=5)
    await sign_in(page, rig.tokens.operator)
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Flow control").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Flow control")
    rules = page.get_by_role("table", name="Flow-control rules, most specific first")
    row = rules.get_by_role("row").filter(has_text=ns)
    await expect(row).to_contain_text("running")
    await page.get_by_label(f"Why pause {ns}").fill("downstream is down")
    await page.get_by_role("button", name=f"Pause {ns}").click()
    await expect(page.get_by_role("status")).to_contain_text(f"Paused {ns}")
    await expect(row).to_contain_text("paused")
    await expect(page.get_by_role("button", name=f"Resume {ns}")).to_be_visible()
    assert (await rule_of(rig, ns)).control.rule.paused
    # With a rule's row and its forms, the page still fits a phone: the table scrolls in its own box.
    await page.set_viewport_size({"width": 360, "height": 780})
    await page.goto("/flow")
    assert await page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


async def test_the_overview_says_a_paused_namespace_is_paused_and_links_its_rule(rig: Rig) -> None:
    ns = f"{rig.shop}/flow-overview"
    await rig.accept(ns, "evt_waiting")
    await set_rule(rig, ns, paused=True)
    async with signed_in(rig, rig.tokens.operator) as (http, _):
        async with http.get(f"{rig.base}/overview") as answer:
            page = await answer.text()
    row = page[page.index(f">{ns}</a>") :]
    row = row[: row.index("</tr>")]
    assert f'href="/flow?namespace={ns.replace("/", "%2F")}"' in row, row
    assert ">paused</a>" in row, row
