"""The server's JSON check takes exactly what PostgreSQL's jsonb takes, both ways.

PostgreSQL no longer parses a payload to store it (it keeps the bytes), but it
parses a JSON payload as jsonb to judge a repeat whose bytes differ, and SQL
users read JSON payloads as jsonb (inboxd_payload_json): so the server must
refuse, under a JSON content type, every payload jsonb would refuse, and
nothing else. This holds both its checks to it: the fast one every payload
gets (`validation.check_payload`) and the exact one it falls back to.
(Nesting deeper than MAX_JSON_DEPTH is inboxd's own limit, which jsonb does
not share: both checks refuse it.)
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given, settings

from inboxd.domain.errors import InvalidArgument
from inboxd.domain.validation import MAX_JSON_DEPTH, _check_payload_exactly, check_payload
from tests.unit.test_validation import _JSON

EDGES = [
    "0e-20000",
    "1e-16384",
    "1e-16383",
    "1e131072",
    "1e131071",
    "9" * 131073,
    "1e999999999999999999999",
    "0e1073741823",
    "0e1073741822",
    '{"a": "\\u0000", "a": 1}',
    '{"a": "\\ud800", "a": 1}',
    '"\\ud83d\\ude00"',
    "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
    '{"a": 1}, {"b": 2}',
    "",
    " 1 ",
    "9" * 5000,
    "0." + "1" * 5000,
    "1.5e-9999",
    "1.5e00010",
    "1" * 4000 + ".5e9999",
    "-0.0E+00000",
]


@pytest.fixture(scope="module")
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def jsonb_takes(conn: psycopg.Connection[tuple[object, ...]], text: str) -> bool:
    try:
        conn.execute("SELECT %s::jsonb", (text,))
    except psycopg.DataError:
        return False
    return True


def exact_check_takes(text: str) -> bool:
    try:
        _check_payload_exactly("payload", text)
    except InvalidArgument:
        return False
    return True


def server_takes(text: str) -> bool:
    try:
        check_payload("payload", text.encode(), 64 * 1024 * 1024)
    except InvalidArgument:
        return False
    return True


@pytest.mark.parametrize("text", EDGES)
def test_jsonb_and_the_exact_check_agree_at_the_edges(conn: psycopg.Connection[tuple[object, ...]], text: str) -> None:
    assert jsonb_takes(conn, text) == exact_check_takes(text) == server_takes(text), text[:60]


@settings(max_examples=1500, derandomize=True, deadline=None)
@given(_JSON)
def test_jsonb_and_the_exact_check_agree(conn: psycopg.Connection[tuple[object, ...]], text: str) -> None:
    assert jsonb_takes(conn, text) == exact_check_takes(text) == server_takes(text), text
