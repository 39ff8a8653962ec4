"""An unexpected exception on an RPC's span keeps its type and frames, never its text (which may name keys)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from inboxd.api.rpc_spans import traced_unary
from inboxd.config.tokens import Caller
from inboxd.observability import tracing

# What psycopg's UniqueViolation says, DETAIL line included (seen on PostgreSQL 15).
DATABASE_TEXT = (
    'duplicate key value violates unique constraint "t_pkey"\nDETAIL:  Key (k)=(alice@example.com) already exists.'
)


class UniqueViolation(Exception):
    pass


class _NoMetadata:
    def invocation_metadata(self) -> tuple[()]:
        return ()


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before, tracing.TRACER = tracing.TRACER, provider.get_tracer("test")
    try:
        yield exporter
    finally:
        tracing.TRACER = before


async def test_a_database_errors_detail_never_leaves_in_a_span(exported: InMemorySpanExporter) -> None:
    async def fails(caller: Caller, request: Any, context: Any) -> Any:
        raise UniqueViolation(DATABASE_TEXT)

    handle = traced_unary("/inboxd.v1.InboxAdminService/Stats", fails)
    with pytest.raises(UniqueViolation):
        await handle(Caller(name="t", scopes=frozenset(), namespaces=("*",)), object(), cast(Any, _NoMetadata()))
    (span,) = exported.get_finished_spans()
    (event,) = span.events
    assert event.name == "exception"
    attributes = dict(event.attributes or {})
    assert str(attributes["exception.type"]).endswith("UniqueViolation")
    assert "alice@example.com" not in repr(attributes)
    assert "withheld" in str(attributes["exception.message"])
    assert "fails" in str(attributes["exception.stacktrace"]), "the frames stay: where it went wrong"
