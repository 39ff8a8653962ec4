"""A fault nobody expected is answered INTERNAL and logged without the database's DETAIL line, which names keys."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc
import psycopg
import pytest

from inboxd.store.database import Database
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.integration.helpers import accept_request, expect_status

SECRET_KEY = "alice@example.com"


@pytest.fixture
async def faulty_namespace(db: Database, ns: str) -> AsyncIterator[str]:
    """Inserts into `ns` meet a unique violation whose DETAIL names the key, as PostgreSQL's own does."""
    literal = ns.replace("'", "''")
    create = f"""
        CREATE FUNCTION test_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.namespace = '{literal}' THEN
                RAISE unique_violation USING MESSAGE = 'duplicate key value violates unique constraint "x"',
                    DETAIL = 'Key (namespace, event_key)=('
                        || NEW.namespace || ', ' || NEW.event_key || ') already exists.';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER test_fault BEFORE INSERT ON inbox_events FOR EACH ROW EXECUTE FUNCTION test_fault();
    """
    async with await psycopg.AsyncConnection.connect(db.conninfo, autocommit=True) as conn:
        await conn.execute(create)
    try:
        yield ns
    finally:
        async with await psycopg.AsyncConnection.connect(db.conninfo, autocommit=True) as conn:
            await conn.execute("DROP TRIGGER test_fault ON inbox_events; DROP FUNCTION test_fault()")


async def test_an_unexpected_database_error_is_internal_and_its_detail_stays_out_of_the_log(
    inbox: InboxServiceStub, faulty_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        error = await expect_status(
            inbox.Accept(accept_request(faulty_namespace, SECRET_KEY)), grpc.StatusCode.INTERNAL
        )
    assert SECRET_KEY not in (error.details() or "")
    logged = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    assert "UniqueViolation" in logged, logged
    assert SECRET_KEY not in logged
