"""The binary text[] and bytea[] parameters AcceptBatch's statement takes (store/arrays.py), read back by PostgreSQL."""

from __future__ import annotations

from typing import Any

from inboxd.store.arrays import Byteas, Texts
from inboxd.store.database import Database


async def test_texts_and_byteas_reach_postgresql_element_for_element(db: Database) -> None:
    texts = ["bench/accept", "", "é", "日本語 key", "a" * 600, "quote ' and \" and { , }"]
    blobs = [b"", b"\x00\x01\xff", b'{"b": 1,   "a": [2,3]}', b"\\x41"]

    async def read(conn: Any) -> tuple[Any, ...]:
        cur = await conn.execute(
            "SELECT %s::text[], %s::bytea[], cardinality(%s::text[]), cardinality(%s::bytea[])",
            (Texts(texts), Byteas(blobs), Texts([]), Byteas([])),
        )
        row: tuple[Any, ...] = await cur.fetchone()
        return row

    got_texts, got_blobs, no_texts, no_blobs = await db.run(read, transaction=False)
    assert got_texts == texts
    assert [bytes(b) for b in got_blobs] == blobs
    assert (no_texts, no_blobs) == (0, 0)
