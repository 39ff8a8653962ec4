"""The benchmark's own writes into inbox_events store a row as inboxd's Accept does since migration 0019.

The raw baseline is only a fair comparison if its INSERT does inboxd's
insert's work (the payload's bytes into raw_payload, no jsonb parse), and a
claim over a prefilled backlog only measures today's claim if it reads rows
as new ones are (raw_payload, not the coalesce over an older row's jsonb).
Each test runs the benchmark's own code against a database of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import psycopg
import pytest

from bench import raw
from bench.history import insert_history
from bench.phases.claim import CLAIM_NS, prefill, prefill_ordered
from bench.workload import PAYLOAD, PAYLOAD_BYTES, Keys
from tests.integration.helpers import own_database

ROW = (
    "SELECT raw_payload, payload IS NULL, content_type, inboxd_payload_json(e) "
    "FROM inbox_events AS e WHERE namespace = %s ORDER BY event_key"
)


@pytest.fixture
async def url(migrated_url: str) -> AsyncIterator[str]:
    async with own_database(migrated_url, prefix="inboxd_bench") as own:
        yield own


async def stored(url: str, namespace: str) -> list[tuple[bytes, bool, str, object]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        rows = await (await conn.execute(ROW, (namespace,))).fetchall()
    return [(bytes(r[0]) if r[0] is not None else b"", r[1], r[2], r[3]) for r in rows]


def as_inboxd_stores(rows: list[tuple[bytes, bool, str, object]], n: int) -> None:
    assert len(rows) == n
    for raw_payload, jsonb_is_null, content_type, as_json in rows:
        assert raw_payload == PAYLOAD_BYTES
        assert jsonb_is_null, "the pre-0019 jsonb column is written"
        assert content_type == "application/json"
        assert as_json == json.loads(PAYLOAD)


async def test_the_raw_one_row_and_100_row_inserts_write_the_payloads_bytes_and_no_jsonb(url: str) -> None:
    async with raw.connections(url, 1) as conns:
        await raw.insert_one_steps(conns, "bench/one", Keys("one"))[0]()
        await raw.insert_many_steps(conns, "bench/many", Keys("many"), 100)[0]()
    as_inboxd_stores(await stored(url, "bench/one"), 1)
    as_inboxd_stores(await stored(url, "bench/many"), 100)


async def test_the_claim_backlogs_and_the_history_write_the_payloads_bytes_and_no_jsonb(url: str) -> None:
    await prefill_ordered(url, 30, "ordered", keys=3)
    as_inboxd_stores(await stored(url, CLAIM_NS), 30)
    await prefill(url, 20, "plain", analyze=False)
    as_inboxd_stores(await stored(url, CLAIM_NS), 20)
    await insert_history(url, 32)
    as_inboxd_stores(await stored(url, "bench/history-0"), 2)


async def test_a_raw_claim_over_the_prefilled_backlog_hands_back_the_bytes_as_sent(url: str) -> None:
    # A row of jsonb would come back as jsonb's rendering (`{"id": "evt_...", ...}`, spaces added).
    await prefill(url, 5, "claimed", analyze=False)
    name, claim = raw.claim_query(CLAIM_NS)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(claim, raw.claim_params(CLAIM_NS, 10, "test"))
        payloads = [bytes(r[3]) for r in await cur.fetchall()]
    assert payloads == [PAYLOAD_BYTES] * 5, name
