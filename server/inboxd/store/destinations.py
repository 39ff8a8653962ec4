"""Destinations in PostgreSQL: the operators' changes (audited), the circuit breaker, and the attempts of each POST."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from inboxd.domain.destinations import (
    BREAKER_FIRST_TRY,
    BREAKER_LONGEST_TRY,
    BREAKER_THRESHOLD,
    DeliveryAttempt,
    Destination,
    DestinationSpec,
    DestinationState,
)
from inboxd.domain.namespace_patterns import grant_to_like
from inboxd.store.database import Connection
from inboxd.store.queries import QUERIES


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


def _destination(row: tuple[Any, ...]) -> Destination:
    (name, url, pattern, secret, timeout_ms, max_attempts, base_ms, cap_ms, forward, concurrency,
     state, paused_reason, next_try_at, failures, created_at, created_by) = row  # fmt: skip
    spec = DestinationSpec(
        name=name,
        url=url,
        namespace_pattern=pattern,
        secret=secret,
        timeout=timedelta(milliseconds=timeout_ms),
        max_attempts=max_attempts,
        backoff_base=timedelta(milliseconds=base_ms),
        backoff_cap=timedelta(milliseconds=cap_ms),
        forward_signature_metadata=forward,
        concurrency=concurrency,
    )
    return Destination(spec, DestinationState(state), paused_reason, next_try_at, failures, created_at, created_by)


def _attempt(row: tuple[Any, ...]) -> DeliveryAttempt:
    (destination, namespace, event_key, webhook_id, attempt, fencing_token, attempted_at, status_code,
     latency_ms, error, excerpt, outcome) = row  # fmt: skip
    return DeliveryAttempt(
        destination, namespace, event_key, webhook_id, attempt, fencing_token, attempted_at, status_code,
        timedelta(milliseconds=latency_ms), error, bytes(excerpt), outcome,
    )  # fmt: skip


async def create(conn: Connection, spec: DestinationSpec, *, actor: str, reason: str, now: datetime | None) -> bool:
    """Creates the destination with its audit row; False when the name is taken (nothing written)."""
    params = {
        "name": spec.name,
        "url": spec.url,
        "namespace_pattern": spec.namespace_pattern,
        "like_pattern": grant_to_like(spec.namespace_pattern),
        "secret": spec.secret,
        "timeout_ms": _ms(spec.timeout),
        "max_attempts": spec.max_attempts,
        "backoff_base_ms": _ms(spec.backoff_base),
        "backoff_cap_ms": _ms(spec.backoff_cap),
        "forward_signature_metadata": spec.forward_signature_metadata,
        "concurrency": spec.concurrency,
        "now": now,
        "actor": actor,
        "reason": reason,
    }
    return await (await conn.execute(QUERIES["destination_insert"], params)).fetchone() is not None


async def get(conn: Connection, name: str) -> Destination | None:
    row = await (await conn.execute(QUERIES["destination_get"], {"name": name})).fetchone()
    return None if row is None else _destination(row)


async def list_all(conn: Connection) -> list[Destination]:
    return [_destination(row) for row in await (await conn.execute(QUERIES["destination_list"])).fetchall()]


async def delete(conn: Connection, name: str, *, actor: str, reason: str, now: datetime | None) -> bool:
    """Removes the destination with its audit row; False when there is none."""
    params = {"name": name, "actor": actor, "reason": reason, "now": now}
    return await (await conn.execute(QUERIES["destination_delete"], params)).fetchone() is not None


async def resume(conn: Connection, name: str, *, actor: str, reason: str, now: datetime | None) -> bool:
    """Closes the destination's breaker with its audit row; False when there is no such destination."""
    params = {"name": name, "actor": actor, "reason": reason, "now": now}
    return await (await conn.execute(QUERIES["destination_resume"], params)).fetchone() is not None


async def answered(conn: Connection, name: str) -> bool:
    """The endpoint answered: the breaker closes; True when it was open."""
    row = await (await conn.execute(QUERIES["destination_answered"], {"name": name})).fetchone()
    return bool(row and row[0])


async def failed(
    conn: Connection, name: str, reason: str, now: datetime | None
) -> tuple[DestinationState, datetime | None] | None:
    """One more failure in a row (the breaker may open, or its next try grows); the state after, None if gone."""
    params = {
        "name": name,
        "reason": reason,
        "now": now,
        "threshold": BREAKER_THRESHOLD,
        "first_try_ms": _ms(BREAKER_FIRST_TRY),
        "longest_try_ms": _ms(BREAKER_LONGEST_TRY),
    }
    row = await (await conn.execute(QUERIES["destination_failed"], params)).fetchone()
    return None if row is None else (DestinationState(row[0]), row[1])


async def take_try(conn: Connection, name: str, window: timedelta, now: datetime | None) -> bool:
    """Takes a paused destination's due try for this replica (next_try_at moves `window` on); False when not due."""
    params = {"name": name, "window_ms": _ms(window), "now": now}
    return await (await conn.execute(QUERIES["destination_take_try"], params)).fetchone() is not None


async def record_attempt(conn: Connection, attempt: DeliveryAttempt) -> None:
    await conn.execute(
        QUERIES["delivery_attempt_insert"],
        {
            "destination": attempt.destination,
            "namespace": attempt.namespace,
            "event_key": attempt.event_key,
            "webhook_id": attempt.webhook_id,
            "attempt": attempt.attempt,
            "fencing_token": attempt.fencing_token,
            "attempted_at": attempt.attempted_at,
            "status_code": attempt.status_code,
            "latency_ms": attempt.latency.total_seconds() * 1000,
            "error": attempt.error,
            "response_excerpt": attempt.response_excerpt,
            "outcome": attempt.outcome,
        },
    )


async def attempts_of_event(conn: Connection, namespace: str, event_key: str) -> list[DeliveryAttempt]:
    cur = await conn.execute(QUERIES["delivery_attempts_of_event"], {"namespace": namespace, "event_key": event_key})
    return [_attempt(row) for row in await cur.fetchall()]


async def recent_attempts(conn: Connection, name: str, limit: int = 20) -> list[DeliveryAttempt]:
    cur = await conn.execute(QUERIES["delivery_attempts_recent"], {"name": name, "limit": limit})
    return [_attempt(row) for row in await cur.fetchall()]
