"""The console's bulk-operations pages over HTTP and in Chromium: preview, confirm, start, follow, cancel, refusals.

Against a real inboxd on a real PostgreSQL: dead letters are made through
the inbox API, the page acts through the console, and what happened is read
back through the admin API (GetEvent, GetBulkOperation), which the runner
of the server's own background duties moves along.
"""

from __future__ import annotations

import asyncio
import html
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from multidict import MultiDict
from playwright.async_api import Page, expect

from inboxd.console.bulk_forms import start_of
from inboxd.console.bulk_page import duration_words, plan_words
from inboxd.domain.bulk_operations import BulkAction
from inboxd.domain.vocabulary import EventState
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from tests.console.rig import Rig
from tests.console.test_console_browser import screenshot_path, sign_in
from tests.console.test_console_flow import post, signed_in

# How long a test waits for an operation the runner is moving to end (it takes a second or two).
OPERATION_DEADLINE_SECONDS = 20.0
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


def _admin(rig: Rig) -> admin_pb2_grpc.InboxAdminServiceStub:
    return admin_pb2_grpc.InboxAdminServiceStub(rig.channel)


def _root(rig: Rig) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {rig.tokens.root}")]


async def operation(rig: Rig, op_id: str) -> admin_pb2.BulkOperation:
    answer = await _admin(rig).GetBulkOperation(admin_pb2.GetBulkOperationRequest(id=op_id), metadata=_root(rig))
    found: admin_pb2.BulkOperation = answer.operation
    return found


async def ended(rig: Rig, op_id: str) -> admin_pb2.BulkOperation:
    """The operation once it is no longer RUNNING (the runner's progress is the signal waited on)."""
    deadline = time.monotonic() + OPERATION_DEADLINE_SECONDS
    while (op := await operation(rig, op_id)).state == admin_pb2.BULK_OPERATION_STATE_RUNNING:
        assert time.monotonic() < deadline, f"operation {op_id} still RUNNING: {op}"
        await asyncio.sleep(0.1)
    return op


async def operations_on(rig: Rig, pattern: str) -> list[admin_pb2.BulkOperation]:
    """Every real (not dry-run) operation on `pattern`, as ListBulkOperations answers them."""
    answer = await _admin(rig).ListBulkOperations(
        admin_pb2.ListBulkOperationsRequest(page_size=100), metadata=_root(rig)
    )
    return [o for o in answer.operations if o.filter.namespace_pattern == pattern and not o.dry_run]


async def states_of(rig: Rig, ns: str, keys: list[str]) -> list[int]:
    return [(await rig.event(ns, key)).summary.state for key in keys]


def form_of(ns: str, csrf: str, **fields: str) -> dict[str, str]:
    return {"namespace_pattern": ns, "state": "dead_lettered", "reason": "SMTP relay is back", "csrf": csrf, **fields}


def confirmation_fields(page: str) -> dict[str, str]:
    """The hidden fields of the confirmation's form: what Start posts."""
    start = page.index('<form method="post" action="/bulk/start"')
    found = _HIDDEN.findall(page[start : page.index("</form>", start)])
    return {name: html.unescape(value) for name, value in found}


async def start_from_the_page(http: aiohttp.ClientSession, rig: Rig, form: dict[str, str]) -> str:
    """Start…, then the confirmation's Start; answers the operation's id from the redirect."""
    status, page = await post(http, rig, "/bulk/preview", {**form, "step": "confirm"})
    assert status == 200, page
    async with http.post(f"{rig.base}/bulk/start", data=confirmation_fields(page), allow_redirects=False) as answer:
        assert answer.status == 303, await answer.text()
        location = answer.headers["Location"]
    assert location.startswith("/bulk/operation?id=")
    return location.split("=", 1)[1]


async def test_preview_shows_the_count_and_the_first_matches_and_changes_nothing(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-preview"
    keys = ["evt_smtp_1", "evt_smtp_2", "evt_smtp_3"]
    for key in keys:
        await rig.dead_letter(ns, key, error="SMTP timeout after 30s")
    await rig.dead_letter(ns, "evt_schema", error="schema: field 'amount' missing")
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        form = form_of(ns, csrf, error_contains="SMTP", step="preview")
        status, page = await post(http, rig, "/bulk/preview", form)
    assert status == 200, page
    assert "3 events match now. A dry run: nothing was changed." in page
    for key in keys:
        assert f'<a href="/event?namespace={ns.replace("/", "%2F")}&amp;key={key}">{key}</a>' in page
    assert "SMTP timeout after 30s" in page and "evt_schema" not in page
    assert 'action="/bulk/start"' not in page  # a look only: starting needs the confirmation step
    assert f'value="{ns}"' in page and 'value="SMTP"' in page  # the form as it was filled in
    assert await states_of(rig, ns, [*keys, "evt_schema"]) == [types_pb2.EVENT_STATE_DEAD_LETTERED] * 4
    assert [len((await rig.event(ns, key)).replays) for key in keys] == [0, 0, 0]
    assert await operations_on(rig, ns) == []


async def test_start_after_its_confirmation_creates_the_operation_and_it_replays_the_matches(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-start"
    keys = ["evt_a", "evt_b", "evt_c"]
    for key in keys:
        await rig.dead_letter(ns, key, error="SMTP timeout")
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        status, page = await post(http, rig, "/bulk/preview", {**form_of(ns, csrf, rate="100"), "step": "confirm"})
        assert status == 200, page
        assert "Replay 3 events at 100/s, about 1 s." in page
        assert await operations_on(rig, ns) == []  # confirming changes nothing either
        op_id = await start_from_the_page(http, rig, form_of(ns, csrf, rate="100"))
        done = await ended(rig, op_id)
        async with http.get(f"{rig.base}/bulk/operation", params={"id": op_id}) as answer:
            shown = await answer.text()
        async with http.get(f"{rig.base}/bulk/operation.json", params={"id": op_id}) as answer:
            figures = await answer.json()
        async with http.get(f"{rig.base}/bulk") as answer:
            listed = await answer.text()
    assert (done.state, done.matched, done.done, done.skipped, done.actor, done.reason) == (
        admin_pb2.BULK_OPERATION_STATE_DONE, 3, 3, 0, "ops-oncall", "SMTP relay is back"
    )  # fmt: skip
    assert await states_of(rig, ns, keys) == [types_pb2.EVENT_STATE_PENDING] * 3
    audit = [[(r.actor, r.reason) for r in (await rig.event(ns, key)).replays] for key in keys]
    assert audit == [[("ops-oncall", "SMTP relay is back")]] * 3
    assert '<span data-field="state">DONE</span>' in shown and '<span data-field="progress">3 / 3</span>' in shown
    assert "Cancel this operation" not in shown and "data-progress" not in shown  # ended: nothing to follow
    assert figures["state"] == "DONE" and (figures["matched"], figures["done"], figures["skipped"]) == (3, 3, 0)
    assert figures["shown"]["progress"] == "3 / 3"
    assert f'href="/bulk/operation?id={op_id}"' in listed


async def test_a_running_operation_is_followed_and_cancelled_from_its_page_with_exact_counts(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-cancel"
    keys = [f"evt_{i}" for i in range(6)]
    for key in keys:
        await rig.dead_letter(ns, key)
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        # One event a second: it runs long enough to be cancelled half-way.
        op_id = await start_from_the_page(http, rig, form_of(ns, csrf, rate="1"))
        async with http.get(f"{rig.base}/bulk/operation", params={"id": op_id}) as answer:
            running = await answer.text()
        assert f'data-progress="/bulk/operation.json?id={op_id}"' in running and "Cancel this operation" in running
        status, page = await post(http, rig, "/bulk/cancel", {"id": op_id, "reason": "stop", "csrf": ""})
        assert status == 403 and "CSRF token is missing or wrong" in page
        status, page = await post(http, rig, "/bulk/cancel", {"id": op_id, "reason": " ", "csrf": csrf})
        assert status == 400 and "Refused: reason: is required" in page and "Cancel this operation" in page
        status, page = await post(http, rig, "/bulk/cancel", {"id": op_id, "reason": "wrong filter", "csrf": csrf})
    assert status == 200, page
    op = await operation(rig, op_id)
    assert op.state == admin_pb2.BULK_OPERATION_STATE_CANCELLED and op.cancelled_by == "ops-oncall"
    assert (
        f"Cancelled: {op.done} event{'' if op.done == 1 else 's'} changed" in page
        and '<span data-field="state">CANCELLED</span>' in page
    )
    replayed = await states_of(rig, ns, keys)
    assert replayed.count(types_pb2.EVENT_STATE_PENDING) == op.done < len(keys)


async def test_ignore_from_the_page_completes_the_matches_as_ignored_with_the_reason(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-ignore"
    for key in ("evt_spam_1", "evt_spam_2"):
        await rig.accept(ns, key, event_type="mail.spam")
    await rig.accept(ns, "evt_ham", event_type="mail.ham")
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        form = form_of(ns, csrf, state="pending", event_types="mail.spam", action="ignore", reason="spam wave")
        status, page = await post(http, rig, "/bulk/preview", {**form, "step": "confirm"})
        assert status == 200 and "Ignore 2 events as fast as the chunks go (no rate)." in page, page
        done = await ended(rig, await start_from_the_page(http, rig, form))
    assert (done.state, done.done, done.action) == (
        admin_pb2.BULK_OPERATION_STATE_DONE,
        2,
        admin_pb2.BULK_ACTION_IGNORE,
    )
    for key in ("evt_spam_1", "evt_spam_2"):
        event = await rig.event(ns, key)
        assert (event.summary.state, event.disposition, event.disposition_reason) == (
            types_pb2.EVENT_STATE_COMPLETED, types_pb2.DISPOSITION_IGNORED, "spam wave"
        )  # fmt: skip
    assert await states_of(rig, ns, ["evt_ham"]) == [types_pb2.EVENT_STATE_PENDING]


async def test_a_start_without_its_confirmation_csrf_or_reason_is_refused_and_starts_nothing(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-refused"
    await rig.dead_letter(ns, "evt_1")
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        status, page = await post(http, rig, "/bulk/start", form_of(ns, csrf))
        assert status == 400 and "Refused: confirmed: start from the confirmation" in page
        status, page = await post(http, rig, "/bulk/start", {**form_of(ns, ""), "confirmed": "1"})
        assert status == 403 and "CSRF token is missing or wrong" in page
        status, page = await post(http, rig, "/bulk/preview", {**form_of(ns, ""), "step": "preview"})
        assert status == 403 and "CSRF token is missing or wrong" in page
        status, page = await post(http, rig, "/bulk/start", {**form_of(ns, csrf, reason=" "), "confirmed": "1"})
        assert status == 400 and "Refused: reason: is required" in page
        assert "A new operation" in page and f'value="{ns}"' in page  # the form again, as it was filled in
    assert await operations_on(rig, ns) == []
    assert await states_of(rig, ns, ["evt_1"]) == [types_pb2.EVENT_STATE_DEAD_LETTERED]


async def test_bad_fields_are_refused_in_words_never_a_500(rig: Rig) -> None:
    ns = f"{rig.shop}/bulk-bad"
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        for fields, said in [
            ({"rate": "fast"}, "Refused: rate: &#x27;fast&#x27; is not a number"),
            ({"rate": "20000"}, "Refused: rate: is 20000"),
            ({"accepted_since": "yesterday"}, "Refused: accepted_since: &#x27;yesterday&#x27; is not a time"),
            ({"state": "pending"}, "Refused: filter.states[0]: is PENDING: REPLAY acts on"),
            ({"action": "delete"}, "Refused: action: &#x27;delete&#x27; is neither replay nor ignore"),
            ({"namespace_pattern": ""}, "Refused: filter.namespace_pattern"),
        ]:
            status, page = await post(http, rig, "/bulk/preview", {**form_of(ns, csrf, **fields), "step": "preview"})
            assert status == 400 and said in page, (fields, status, page)


async def test_patterns_and_operations_beyond_the_sessions_grants_are_refused_and_never_listed(rig: Rig) -> None:
    theirs = f"{rig.other}/bulk-theirs"
    await rig.dead_letter(theirs, "evt_1")
    started = await _admin(rig).StartBulkOperation(
        admin_pb2.StartBulkOperationRequest(
            filter=admin_pb2.BulkFilter(namespace_pattern=theirs), action=admin_pb2.BULK_ACTION_REPLAY,
            reason="their own", dry_run=True,
        ),
        metadata=_root(rig),
    )  # fmt: skip
    their_op = started.operation.id
    async with signed_in(rig, rig.tokens.operator) as (http, csrf):
        status, page = await post(http, rig, "/bulk/preview", {**form_of(theirs, csrf), "step": "preview"})
        assert status == 403 and "Refused: " in page and "A new operation" in page
        status, page = await post(http, rig, "/bulk/preview", {**form_of("*", csrf), "step": "preview"})
        assert status == 403 and "Refused: " in page
        async with http.get(f"{rig.base}/bulk") as answer:
            assert their_op not in await answer.text()
        async with http.get(f"{rig.base}/bulk/operation", params={"id": their_op}) as answer:
            assert answer.status in (403, 404) and "their own" not in await answer.text()
        async with http.get(f"{rig.base}/bulk/operation.json", params={"id": their_op}) as answer:
            assert answer.status in (403, 404) and "error" in await answer.json()
        async with http.get(f"{rig.base}/bulk/operation", params={"id": "not-an-id"}) as answer:
            assert answer.status == 404 and "no bulk operation" in await answer.text()
    assert await states_of(rig, theirs, ["evt_1"]) == [types_pb2.EVENT_STATE_DEAD_LETTERED]


def test_the_form_becomes_the_use_cases_request_field_by_field() -> None:
    form = MultiDict(
        [("namespace_pattern", " shop/* "), ("state", "dead_lettered"), ("state", "pending"), ("action", "ignore"),
         ("event_types", "charge.refunded, ,mail.sent"), ("accepted_since", "2026-12-02T06:00"),
         ("accepted_until", "2026-12-02T07:30:00+01:00"), ("error_contains", "SMTP"), ("reason", "spam"),
         ("rate", "2.5")]
    )  # fmt: skip
    request = start_of(form, dry_run=True)
    f = request.filter
    assert (f.namespace_pattern, f.states, f.event_types) == (
        "shop/*", (EventState.DEAD_LETTERED, EventState.PENDING), ("charge.refunded", "mail.sent")
    )  # fmt: skip
    assert f.accepted_from == datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    assert f.accepted_until == datetime(2026, 12, 2, 6, 30, tzinfo=UTC)
    assert (request.action, request.reason, request.rate, request.dry_run) == (BulkAction.IGNORE, "spam", 2.5, True)
    # No state ticked: the contract's default, dead letters; no rate: no pace.
    bare = start_of(MultiDict([("namespace_pattern", "shop/a"), ("reason", "x")]), dry_run=False)
    assert (bare.filter.states, bare.action, bare.rate) == ((EventState.DEAD_LETTERED,), BulkAction.REPLAY, 0.0)


def test_the_plan_says_what_starting_will_do_and_about_how_long() -> None:
    assert plan_words(BulkAction.REPLAY, 9812, 200) == "Replay 9,812 events at 200/s, about 49 s"
    assert plan_words(BulkAction.IGNORE, 1, 0) == "Ignore 1 event as fast as the chunks go (no rate)"
    assert plan_words(BulkAction.REPLAY, 0, 10) == "Replay 0 events: nothing matches now"
    assert duration_words(600) == "about 10 min" and duration_words(7500) == "about 2 h 5 min"


async def test_an_operator_previews_confirms_and_watches_a_replay_finish_in_chromium(
    rig: Rig, page: Page, tmp_path: Path
) -> None:
    ns = f"{rig.shop}/mailer"
    keys = [f"msg_{i}" for i in range(1, 7)]
    for key in keys:
        await rig.dead_letter(ns, key, error="SMTP timeout: mail.example.net:587 did not answer in 30s")
    await rig.dead_letter(ns, "msg_bad_address", error="550 no such user")
    await sign_in(page, rig.tokens.operator)
    await page.get_by_role("navigation", name="Main").get_by_role("link", name="Bulk operations").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Bulk operations")
    await page.get_by_label("Namespace or pattern").fill(ns)
    await page.get_by_label("Last error contains").fill("SMTP timeout")
    await page.get_by_role("textbox", name="Reason").fill("SMTP relay is back")
    await page.get_by_label("Rate, events per second").fill("4")
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("#bulk-matched")).to_contain_text("6 events match now")
    matches = page.get_by_role("table", name="First matches, oldest accepted first")
    await expect(matches.get_by_role("link", name="msg_1", exact=True)).to_be_visible()
    await expect(matches).not_to_contain_text("msg_bad_address")

    await page.get_by_role("button", name="Start…").click()
    await expect(page.locator("#bulk-plan")).to_have_text(
        "Replay 6 events at 4/s, about 2 s. Events that move on before their turn are skipped, and counted."
    )
    await page.screenshot(path=screenshot_path("console-bulk-confirm.png", tmp_path), full_page=True)
    await page.get_by_role("button", name="Start: Replay 6 events at 4/s, about 2 s").click()
    await expect(page).to_have_url(re.compile(r"/bulk/operation\?id="))
    # The page follows the run by itself, then shows it ended.
    await expect(page.get_by_role("button", name="Cancel this operation")).to_be_visible()
    await expect(page.locator('[data-field="state"]')).to_have_text("DONE", timeout=15_000)
    await expect(page.locator('[data-field="progress"]')).to_have_text("6 / 6")
    await expect(page.get_by_role("button", name="Cancel this operation")).to_have_count(0)
    await page.screenshot(path=screenshot_path("console-bulk-done.png", tmp_path), full_page=True)
    assert await states_of(rig, ns, keys) == [types_pb2.EVENT_STATE_PENDING] * 6
    assert await states_of(rig, ns, ["msg_bad_address"]) == [types_pb2.EVENT_STATE_DEAD_LETTERED]
