"""The event page shows a payload by its content type, escaped: pretty JSON, a form's fields, text, hex."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import aiohttp

from inboxd.console.event_page import event_page
from inboxd.domain.operator_views import ConflictingCopy, EventRecord, EventSummary
from inboxd.domain.vocabulary import EventKey, EventState, Namespace
from tests.console.rig import Rig, cookie_jar, http_sign_in

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
SCRIPT = "<script>alert(1)</script>"
# The same hostile markup in each shape a payload can take on the page.
HOSTILE = {
    "application/json": b'{"note": "<script>alert(1)</script>", "<b>": 1}',
    "application/x-www-form-urlencoded": b"%3Cscript%3E=x&note=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "text/xml": b"<script>alert(1)</script>",
    "text/plain": b'"><script>alert(1)</script>',
    "application/octet-stream": b"<script>alert(1)</script>\x00\xff",
}


def _record(payload: bytes | None, content_type: str, conflicts: tuple[ConflictingCopy, ...] = ()) -> EventRecord:
    summary = EventSummary(
        Namespace("shop/twilio"), EventKey("SM1"), "sms.received", EventState.PENDING, 0, NOW, NOW, NOW, ""
    )
    return EventRecord(
        summary=summary,
        payload=payload,
        content_type=content_type,
        metadata={},
        message_id="",
        ordering_key="",
        revision=0,
        disposition=None,
        disposition_reason="",
        lease_expires_at=None,
        completed_at=None,
        conflicts=conflicts,
        conflict_count=len(conflicts),
    )


def _copy(payload: bytes, content_type: str) -> ConflictingCopy:
    return ConflictingCopy("sms.received", payload, {}, NOW, b"\x01" * 32, len(payload), content_type=content_type)


def _shown(record: EventRecord) -> str:
    return event_page(record, show_payload=True, who="ops", csrf="c")


def test_a_hostile_payload_is_escaped_in_every_shape_and_in_every_conflicting_copy() -> None:
    copies = tuple(_copy(body, content_type) for content_type, body in HOSTILE.items())
    for content_type, body in HOSTILE.items():
        page = _shown(_record(body, content_type, copies))
        assert "<script>" not in page.replace('<script src="/static/console.js" defer></script>', ""), content_type
        assert "<b>" not in page
    page = _shown(_record(HOSTILE["text/plain"], "text/plain", copies))
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4  # the payload, and the copies in text shapes
    assert "&quot;&gt;&lt;script&gt;" in page
    hostile_type = _shown(_record(b"x", '"><script>alert(1)</script>'))
    assert SCRIPT not in hostile_type and "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in hostile_type


def test_a_json_payload_is_pretty_printed_under_its_content_type() -> None:
    page = _shown(_record(b'{"b":1,"a":[2]}', "application/cloudevents+json"))
    assert '<code class="content-type">application/cloudevents+json</code> · 15 bytes · shown as JSON' in page
    pre = re.search(r'<pre class="payload payload-json"[^>]*>(.*?)</pre>', page, re.S)
    assert pre is not None and pre.group(1) == "{\n  &quot;b&quot;: 1,\n  &quot;a&quot;: [\n    2\n  ]\n}"


def test_a_form_body_is_a_table_of_its_fields_in_order_with_repeated_names() -> None:
    page = _shown(_record(b"To=%2B1555&Body=two+words&To=x&Empty=", "application/x-www-form-urlencoded"))
    table = page.split('aria-label="Form fields"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table)
    assert rows == [("To", "+1555"), ("Body", "two words"), ("To", "x"), ("Empty", "")]


def test_text_is_text_and_other_bytes_are_hex_with_a_note_for_what_is_not_shown() -> None:
    text = _shown(_record("<a>café</a>".encode(), "application/atom+xml"))
    assert '<pre class="payload payload-text" tabindex="0">&lt;a&gt;café&lt;/a&gt;</pre>' in text
    binary = _shown(_record(bytes(range(256)) * 20, "application/octet-stream"))
    assert "00000000  00 01 02 03 04 05 06 07  08 09 0a 0b 0c 0d 0e 0f  |................|" in binary
    assert "1,024 of 5,120 bytes not shown (the first 4,096 are)." in binary
    undecodable = _shown(_record(b"caf\xe9", "text/plain; charset=utf-8"))
    assert "Does not decode as utf-8: shown as hex." in undecodable and "shown as hex</p>" in undecodable


def test_the_content_type_is_in_the_record_and_a_dropped_payload_says_so() -> None:
    hidden = event_page(_record(None, "text/plain"), show_payload=False, who="ops", csrf="c")
    assert '<dt>Content type</dt><dd><code class="content-type">text/plain</code></dd>' in hidden
    assert "Dropped by payload retention." in _shown(_record(None, "text/plain"))


def test_conflicting_copies_are_shown_by_their_own_content_type() -> None:
    copies = (_copy(b"Body=hi&Body=again", "application/x-www-form-urlencoded"), _copy(b"\x00\x01", "image/png"))
    page = _shown(_record(b"{}", "application/json", copies))
    conflicts = page.split('id="conflicts"', 1)[1]
    assert 'aria-label="Form fields of copy 1"' in conflicts
    assert re.findall(r"<tr><td>(Body)</td><td>(\w+)</td></tr>", conflicts) == [("Body", "hi"), ("Body", "again")]
    assert "00000000  00 01" in conflicts and '<code class="content-type">image/png</code>' in conflicts


async def _event_page(rig: Rig, ns: str, key: str) -> str:
    async with aiohttp.ClientSession(cookie_jar=cookie_jar()) as http:
        await http_sign_in(http, rig.base, rig.tokens.operator)
        async with http.get(f"{rig.base}/event", params={"namespace": ns, "key": key, "payload": "1"}) as answer:
            assert answer.status == 200
            return await answer.text()


async def test_the_event_page_of_a_real_json_event_names_its_content_type_and_pretty_prints_it(rig: Rig) -> None:
    ns = f"{rig.shop}/json"
    await rig.accept(ns, "evt_1", payload={"note": SCRIPT})
    page = await _event_page(rig, ns, "evt_1")
    assert '<dt>Content type</dt><dd><code class="content-type">application/json</code></dd>' in page
    assert "shown as JSON, pretty-printed" in page
    assert "&quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in page


async def test_the_event_page_shows_real_form_text_and_binary_events_and_their_copies_by_type(rig: Rig) -> None:
    ns = f"{rig.shop}/twilio"
    form = b"From=%2B15551234567&Body=%3Cscript%3Ealert(1)%3C%2Fscript%3E&MediaUrl0=a&MediaUrl0=b"
    await rig.accept(ns, "SM1", form, event_type="sms.received", content_type="application/x-www-form-urlencoded")
    # The same key with other bytes of another type: a conflicting copy, shown by its own type.
    await rig.accept(ns, "SM1", b"\x89PNG\r\n\x1a\n<script>", event_type="sms.received", content_type="image/png")
    await rig.accept(ns, "note", b"<note>\n  caf\xc3\xa9\n</note>", content_type="application/xml")
    page = await _event_page(rig, ns, "SM1")
    assert SCRIPT not in page
    fields = page.split('aria-label="Form fields"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", fields) == [
        ("From", "+15551234567"),
        ("Body", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("MediaUrl0", "a"),
        ("MediaUrl0", "b"),
    ]
    conflicts = page.split('id="conflicts"', 1)[1]
    assert '<code class="content-type">image/png</code>' in conflicts
    assert "00000000  89 50 4e 47 0d 0a 1a 0a  3c 73 63 72 69 70 74 3e  |.PNG....&lt;script&gt;|" in conflicts
    text = await _event_page(rig, ns, "note")
    assert '<pre class="payload payload-text" tabindex="0">&lt;note&gt;\n  café\n&lt;/note&gt;</pre>' in text
