"""How a payload is shown by its content type: JSON pretty-printed, form fields, text, hex (domain/payload_display)."""

from __future__ import annotations

import pytest

from inboxd.domain.payload_display import (
    FORM_SHOWN_FIELDS,
    HEX_SHOWN_BYTES,
    Shape,
    charset,
    display_payload,
    hex_dump,
    media_type,
)


@pytest.mark.parametrize("content_type", ["", "application/json", "Application/JSON; charset=utf-8", "a/vnd.x+json"])
def test_a_json_type_is_pretty_printed_and_an_empty_content_type_is_json(content_type: str) -> None:
    shown = display_payload(b'{"a":[1,{}],"b":[]}', content_type)
    assert shown.shape is Shape.JSON
    assert shown.text == '{\n  "a": [\n    1,\n    {}\n  ],\n  "b": []\n}'
    assert shown.content_type == (content_type or "application/json")


def test_json_keeps_the_senders_member_order_repeated_names_and_number_spelling() -> None:
    shown = display_payload(b'{"b": 1,   "a": 1.0e400, "b": 12345678901234567890.50, "c": "\\u00e9\\/"}', "")
    assert shown.text == '{\n  "b": 1,\n  "a": 1.0e400,\n  "b": 12345678901234567890.50,\n  "c": "é/"\n}'


def test_a_lone_surrogate_escape_stays_an_escape_so_the_text_can_be_encoded() -> None:
    shown = display_payload(b'["\\ud800", "\\u2028"]', "application/json")
    assert shown.text == '[\n  "\\ud800",\n  "\u2028"\n]'
    shown.text.encode("utf-8")


@pytest.mark.parametrize("body", [b"{not json", b"NaN", b'{"a": 1} trailing', b"\xff\xfe{}", b""])
def test_bytes_that_are_not_json_under_a_json_type_are_shown_as_hex_saying_why(body: bytes) -> None:
    shown = display_payload(body, "application/json")
    assert shown.shape is Shape.HEX
    assert shown.note == "not valid JSON: shown as hex"
    assert shown.text == hex_dump(body)[0]


def test_a_form_body_is_its_fields_in_order_with_repeated_names_and_blank_values() -> None:
    body = b"To=%2B15551234567&Body=Hello+there%21&MediaUrl=a&MediaUrl=b&Empty=&Bare"
    shown = display_payload(body, "application/x-www-form-urlencoded")
    assert shown.shape is Shape.FORM
    assert shown.fields == (
        ("To", "+15551234567"),
        ("Body", "Hello there!"),
        ("MediaUrl", "a"),
        ("MediaUrl", "b"),
        ("Empty", ""),
        ("Bare", ""),
    )
    assert shown.note == "" and shown.size == len(body)


def test_a_form_is_decoded_in_its_declared_charset_and_shown_as_hex_when_it_does_not_decode() -> None:
    latin = display_payload(b"name=Jos%E9", "application/x-www-form-urlencoded; charset=ISO-8859-1")
    assert latin.fields == (("name", "José"),)
    broken = display_payload(b"name=Jos%E9", "application/x-www-form-urlencoded")
    assert broken.shape is Shape.HEX
    assert broken.note == "not a form in utf-8: shown as hex"


def test_a_huge_form_shows_its_first_fields_and_counts_the_rest() -> None:
    body = "&".join(f"f{i}={i}" for i in range(FORM_SHOWN_FIELDS + 5)).encode()
    shown = display_payload(body, "application/x-www-form-urlencoded")
    assert len(shown.fields) == FORM_SHOWN_FIELDS and shown.fields[-1] == ("f999", "999")
    assert shown.note == "5 more fields not shown (the first 1,000 are)"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "text/xml", "application/xml", "application/atom+xml; charset=utf-8", "TEXT/CSV"]
)
def test_text_and_xml_are_shown_as_text(content_type: str) -> None:
    body = '<?xml version="1.0"?>\n<note>café</note>'.encode()
    shown = display_payload(body, content_type)
    assert shown.shape is Shape.TEXT
    assert shown.text == body.decode()


def test_text_is_decoded_in_its_charset_and_shown_as_hex_when_it_does_not_decode() -> None:
    assert display_payload(b"caf\xe9", 'text/plain; charset="iso-8859-1"').text == "café"
    undecodable = display_payload(b"caf\xe9", "text/plain")
    assert undecodable.shape is Shape.HEX and undecodable.note == "does not decode as utf-8: shown as hex"
    unknown = display_payload(b"cafe", "text/plain; charset=x-made-up")
    assert unknown.shape is Shape.HEX and unknown.note == "does not decode as x-made-up: shown as hex"


@pytest.mark.parametrize("content_type", ["application/octet-stream", "image/png", "application/pdf", "multipart/x"])
def test_any_other_type_is_shown_as_hex_without_a_reason(content_type: str) -> None:
    shown = display_payload(b"\x89PNG\r\n", content_type)
    assert shown.shape is Shape.HEX and shown.note == ""


def test_the_hex_dump_has_offsets_hex_and_printable_ascii_as_hexdump_c() -> None:
    dump, hidden = hex_dump(b'{"a": 1}\n\x00\xff0123456789abcdef')
    assert dump.splitlines() == [
        '00000000  7b 22 61 22 3a 20 31 7d  0a 00 ff 30 31 32 33 34  |{"a": 1}...01234|',
        "00000010  35 36 37 38 39 61 62 63  64 65 66                 |56789abcdef|",
    ]
    assert hidden == 0
    assert hex_dump(b"") == ("", 0)


def test_a_big_binary_body_shows_its_first_bytes_and_says_how_many_are_not_shown() -> None:
    body = bytes(range(256)) * 40
    shown = display_payload(body, "application/octet-stream")
    lines = shown.text.splitlines()
    assert len(lines) == HEX_SHOWN_BYTES // 16
    assert lines[-1].startswith("00000ff0  f0 f1")
    assert shown.note == "6,144 of 10,240 bytes not shown (the first 4,096 are)"
    undecodable = display_payload(b"\xff" * 5000, "text/plain")
    assert undecodable.note.split("; ") == [
        "does not decode as utf-8: shown as hex",
        "904 of 5,000 bytes not shown (the first 4,096 are)",
    ]


def test_media_type_and_charset_are_read_case_insensitively_with_utf_8_by_default() -> None:
    assert media_type(" Text/Plain ; charset=UTF-8") == "text/plain"
    assert media_type("") == "application/json"
    assert charset('text/plain; format=flowed; Charset="Windows-1252"') == "windows-1252"
    assert charset("text/plain") == "utf-8"


def test_a_charset_that_decodes_to_lone_surrogates_is_shown_as_hex_not_as_text_nothing_can_encode() -> None:
    text = display_payload(b"\\ud800", "text/plain; charset=unicode_escape")
    assert (text.shape, text.note) == (Shape.HEX, "does not decode as unicode_escape: shown as hex")
    form = display_payload(b"a=%5Cud800", "application/x-www-form-urlencoded; charset=unicode_escape")
    assert (form.shape, form.note) == (Shape.HEX, "not a form in unicode_escape: shown as hex")
