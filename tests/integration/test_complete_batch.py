"""CompleteBatch: many Completes in one call and one transaction, each item fenced and judged alone."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from inboxd.config.settings import Settings
from inboxd.config.tokens import Scope, TokenRegistry, entry_toml, new_token
from inboxd.serving.server import RunningServer, start_server
from inboxd.store.database import Connection, Database
from inboxd.store.queries import QUERIES
from inboxd_client.v1 import inbox_pb2, types_pb2
from inboxd_client.v1.inbox_pb2_grpc import InboxServiceStub
from tests.conftest import NO_RESCUER
from tests.integration.helpers import accept_request, expect_status, read_event

OK, INVALID, NOT_FOUND, DENIED, ABORTED = 0, 3, 5, 7, 10


async def claimed(inbox: InboxServiceStub, ns: str, *keys: str, **md: Any) -> dict[str, inbox_pb2.ClaimedEvent]:
    for key in keys:
        await inbox.Accept(accept_request(ns, key), **md)
    answer = await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns], max_events=len(keys)), **md)
    assert len(answer.events) == len(keys)
    return {e.event_key: e for e in answer.events}


def item(event: inbox_pb2.ClaimedEvent, **fields: Any) -> inbox_pb2.CompleteRequest:
    base = {"namespace": event.namespace, "event_key": event.event_key, "claim_token": event.claim_token}
    return inbox_pb2.CompleteRequest(**{**base, **fields})


def codes(response: inbox_pb2.CompleteBatchResponse) -> list[int]:
    return [r.code for r in response.results]


async def test_each_item_gets_the_answer_complete_would_have_given_it(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    events = await claimed(inbox, ns, "fresh", "repeat", "stale", "ignored")
    await inbox.Complete(item(events["repeat"]))
    response = await inbox.CompleteBatch(
        inbox_pb2.CompleteBatchRequest(
            completions=[
                item(events["fresh"]),
                item(events["repeat"]),  # completed earlier by this same token: OK
                item(events["stale"], claim_token="not-the-current-claim"),
                inbox_pb2.CompleteRequest(namespace=ns, event_key="nobody", claim_token="t"),
                item(events["ignored"], event_key=""),
                item(events["ignored"], disposition=types_pb2.DISPOSITION_IGNORED),  # no reason
                item(events["ignored"], disposition=types_pb2.DISPOSITION_IGNORED, reason="not ours"),
            ]
        )
    )
    assert codes(response) == [OK, OK, ABORTED, NOT_FOUND, INVALID, INVALID, OK]
    messages = [r.message for r in response.results]
    assert messages[0] == messages[1] == messages[6] == ""
    assert "claim superseded" in messages[2]
    assert "nobody" in messages[3]
    assert messages[4].startswith("completions[4].event_key")
    assert messages[5].startswith("completions[5].reason")
    # The refusals changed nothing; the others are done.
    assert (await read_event(db, ns, "stale"))["state"] == "processing"
    for key in ("fresh", "repeat"):
        assert (await read_event(db, ns, key))["state"] == "completed"
    ignored = await read_event(db, ns, "ignored")
    assert (ignored["state"], ignored["disposition"], ignored["disposition_reason"]) == (
        "completed",
        "ignored",
        "not ours",
    )


async def test_all_items_are_written_by_one_transaction(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    keys = [f"k{i}" for i in range(20)]
    events = await claimed(inbox, ns, *keys)
    response = await inbox.CompleteBatch(inbox_pb2.CompleteBatchRequest(completions=[item(events[k]) for k in keys]))
    assert codes(response) == [OK] * len(keys)

    async def writers(conn: Connection) -> tuple[int, int, int]:
        # xmin names the transaction that wrote a row version: one for all, or the batch was split.
        cur = await conn.execute(
            "SELECT count(DISTINCT e.xmin::text), count(DISTINCT c.xmin::text), count(*) FILTER (WHERE"
            " e.state = 'completed' AND c.outcome = 'completed') FROM inbox_events e"
            " JOIN inbox_claims c USING (namespace, event_key) WHERE e.namespace = %s",
            (ns,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    events_writers, claims_writers, completed = await db.run(writers)
    assert completed == len(keys)
    assert events_writers == 1
    assert claims_writers == 1


async def test_the_same_token_twice_in_one_batch_completes_once_and_answers_ok_twice(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    event = (await claimed(inbox, ns, "k"))["k"]
    response = await inbox.CompleteBatch(
        inbox_pb2.CompleteBatchRequest(
            completions=[item(event), item(event, disposition=types_pb2.DISPOSITION_IGNORED, reason="again")]
        )
    )
    assert codes(response) == [OK, OK]
    row = await read_event(db, ns, "k")
    # The first item decided how the event ended; the second was a repeat.
    assert (row["state"], row["disposition"]) == ("completed", "applied")


async def test_two_tokens_of_one_event_in_one_batch_complete_only_the_current_one(
    inbox: InboxServiceStub, db: Database, ns: str
) -> None:
    first = (await claimed(inbox, ns, "k"))["k"]
    await inbox.Release(inbox_pb2.ReleaseRequest(namespace=ns, event_key="k", claim_token=first.claim_token))
    second = (await inbox.Claim(inbox_pb2.ClaimRequest(namespaces=[ns]))).events[0]
    response = await inbox.CompleteBatch(inbox_pb2.CompleteBatchRequest(completions=[item(first), item(second)]))
    assert codes(response) == [ABORTED, OK]
    assert (await read_event(db, ns, "k"))["claim_token"] == second.claim_token


@pytest.mark.parametrize("count", [0, 501])
async def test_an_empty_or_oversized_batch_is_refused_whole(inbox: InboxServiceStub, ns: str, count: int) -> None:
    request = inbox_pb2.CompleteBatchRequest(
        completions=[inbox_pb2.CompleteRequest(namespace=ns, event_key=f"k{i}", claim_token="t") for i in range(count)]
    )
    error = await expect_status(inbox.CompleteBatch(request), grpc.StatusCode.INVALID_ARGUMENT)
    assert "completions" in (error.details() or "")


# -- namespaces: checked per item --


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    grants = {
        "worker-a": ([Scope.WORK], ["tenant-a/*"]),
        "edge-a": ([Scope.ACCEPT], ["tenant-a/*"]),
        "root": (list(Scope), ["*"]),
    }
    tokens = {name: new_token() for name in grants}
    path = tmp_path_factory.mktemp("tokens") / "tokens.toml"
    path.write_text("\n".join(entry_toml(n, tokens[n], *grants[n]) for n in grants))
    return {**tokens, "file": str(path)}


@pytest.fixture(scope="module")
async def guarded(db: Database, tokens: dict[str, str]) -> AsyncIterator[InboxServiceStub]:
    file = Path(tokens["file"])
    running: RunningServer = await start_server(
        Settings(rescue_interval=NO_RESCUER, listen="127.0.0.1:0", tokens_file=file), db, registry=TokenRegistry(file)
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        yield InboxServiceStub(channel)
    await running.stop(1.0)


def bearer(token: str) -> dict[str, Any]:
    return {"metadata": [("authorization", f"Bearer {token}")]}


async def test_an_item_in_a_namespace_the_token_may_not_touch_is_refused_alone(
    guarded: InboxServiceStub, db: Database, tokens: dict[str, str], ns: str
) -> None:
    mine, theirs = f"tenant-a/{ns}", f"tenant-b/{ns}"
    own = (await claimed(guarded, mine, "own", **bearer(tokens["root"])))["own"]
    foreign = (await claimed(guarded, theirs, "foreign", **bearer(tokens["root"])))["foreign"]
    response = await guarded.CompleteBatch(
        inbox_pb2.CompleteBatchRequest(completions=[item(foreign), item(own)]), **bearer(tokens["worker-a"])
    )
    assert codes(response) == [DENIED, OK]
    assert "completions[0].namespace" in response.results[0].message
    assert (await read_event(db, theirs, "foreign"))["state"] == "processing"
    assert (await read_event(db, mine, "own"))["state"] == "completed"


@pytest.mark.parametrize(
    ("token", "code"),
    [
        (None, grpc.StatusCode.UNAUTHENTICATED),
        ("edge-a", grpc.StatusCode.PERMISSION_DENIED),  # no work scope: the call itself is refused
    ],
)
async def test_a_caller_without_a_work_token_is_refused_whole(
    guarded: InboxServiceStub, tokens: dict[str, str], ns: str, token: str | None, code: grpc.StatusCode
) -> None:
    request = inbox_pb2.CompleteBatchRequest(
        completions=[inbox_pb2.CompleteRequest(namespace=f"tenant-a/{ns}", event_key="k", claim_token="t")]
    )
    await expect_status(guarded.CompleteBatch(request, **(bearer(tokens[token]) if token else {})), code)


# -- one rule for the server and for inboxd_complete() --


def _normalized(sql: str) -> str:
    sql = re.sub(r"--[^\n]*", "", sql)
    for name in ("namespaces", "event_keys", "claim_tokens", "dispositions", "reasons"):
        sql = sql.replace(f"%({name})b::text[]", f"p_{name}")
    sql = sql.replace("%(now)s", "p_now")
    return " ".join(sql.split()).rstrip(";").strip()


async def test_the_servers_statement_is_the_rule_inboxd_complete_runs(db: Database) -> None:
    async def function_body(conn: Connection) -> str:
        cur = await conn.execute("SELECT prosrc FROM pg_proc WHERE proname = 'inboxd_complete_events'")
        row = await cur.fetchone()
        assert row is not None, "migration 0005 installs inboxd_complete_events"
        return str(row[0])

    body = await db.run(function_body)
    statement = body.split("RETURN QUERY", 1)[1].rsplit("END", 1)[0]
    assert _normalized(statement) == _normalized(QUERIES["event_complete_many"])


async def test_inboxd_complete_event_keeps_its_answers(inbox: InboxServiceStub, db: Database, ns: str) -> None:
    events = await claimed(inbox, ns, "a", "b")

    async def answer(key: str, token: str) -> str:
        async def work(conn: Connection) -> str:
            cur = await conn.execute("SELECT inboxd_complete_event(%s, %s, %s)", (ns, key, token))
            row = await cur.fetchone()
            assert row is not None
            return str(row[0])

        return await db.run(work)

    assert await answer("a", events["a"].claim_token) == "completed"
    assert await answer("a", events["a"].claim_token) == "already_completed"
    assert await answer("b", "someone-else") == "superseded"
    assert await answer("missing", "t") == "not_found"
    row = await read_event(db, ns, "a")
    assert (row["state"], row["disposition"]) == ("completed", "applied")


async def test_nasty_items_get_their_own_documented_codes_never_internal(inbox: InboxServiceStub, ns: str) -> None:
    nasty = ["", "\x00", "a\x00b", "' OR 1=1 --", "%", "_", "\\", "*", "é" * 300, "🙂" * 129, "\u202e"]
    completions = [
        inbox_pb2.CompleteRequest(
            namespace=ns + value if i % 3 else value,
            event_key=value or "k",
            claim_token=value if i % 2 else "t",
            disposition=i % 5,  # type: ignore[arg-type]  # 3 and 4 are no Disposition at all
            reason=value,
        )
        for i, value in enumerate(nasty * 3)
    ]
    response = await inbox.CompleteBatch(inbox_pb2.CompleteBatchRequest(completions=completions))
    assert len(response.results) == len(completions)
    assert set(codes(response)) <= {INVALID, NOT_FOUND}
    assert INVALID in codes(response) and NOT_FOUND in codes(response)
