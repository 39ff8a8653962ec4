"""The example email worker, as a subprocess, killed with SIGKILL at random moments around its sends.

Whatever the moment, each event must end up with exactly one email sent,
under one idempotency key, on the Work stream and on unary Claims alike. The kill moments come from a seeded generator;
the seed is printed (set INBOXD_KILL_SEED to replay another).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from inboxd.serving.server import RunningServer
from inboxd.store.database import Database
from inboxd_client import AsyncInboxClient
from tests.client.fake_email_api import FakeEmailApi
from tests.client.helpers import eventually, read_event

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "email_worker.py"
USERS = 24
SILENT_USERS = 2  # signed up without an email address: ignored, never mailed
KILLS = 10
SEED = int(os.environ.get("INBOXD_KILL_SEED", "20250607"))


@pytest.fixture
def email_api() -> Iterator[FakeEmailApi]:
    # Each first answer is held back 20-80 ms after the send is recorded: a
    # wide window for a kill to land between "sent" and "heard back".
    api = FakeEmailApi(answer_delay=(0.02, 0.08), seed=SEED).start()
    yield api
    api.stop()


@pytest.fixture
async def patient_client(patient_server: RunningServer) -> AsyncIterator[AsyncInboxClient]:
    async with AsyncInboxClient(f"127.0.0.1:{patient_server.port}") as client:
        yield client


async def start_worker(
    server: RunningServer, api: FakeEmailApi, ns: str, log: Path, path: str
) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "INBOXD_TARGET": f"127.0.0.1:{server.port}",
        "INBOXD_NAMESPACE": ns,
        "EMAIL_API_URL": api.url,
        "INBOXD_CONCURRENCY": "2",
        "INBOXD_LEASE": "2",
        "INBOXD_WAIT": "1",
        "LOG_LEVEL": "WARNING",
        "INBOXD_USE_STREAMS": "1" if path == "stream" else "0",
    }
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, str(EXAMPLE), env=env, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL
        )


async def test_a_worker_killed_at_random_moments_sends_exactly_one_email_per_event(
    patient_server: RunningServer,
    patient_client: AsyncInboxClient,
    email_api: FakeEmailApi,
    db: Database,
    ns: str,
    tmp_path: Path,
    worker_path: str,
) -> None:
    print(f"kill test seed: {SEED} (INBOXD_KILL_SEED)")
    rng = random.Random(SEED)
    emails = {f"user-{i}": f"user-{i}@example.com" for i in range(USERS)}
    for key, email in emails.items():
        await patient_client.accept(ns, key, "user.signed_up", {"email": email, "name": key})
    for i in range(SILENT_USERS):
        await patient_client.accept(ns, f"silent-{i}", "user.signed_up", {"name": "nobody"})
    keys = [*emails, *(f"silent-{i}" for i in range(SILENT_USERS))]
    log = tmp_path / "worker.log"

    async def all_completed() -> bool:
        for key in keys:
            if (await read_event(db, ns, key))["state"] != "completed":
                return False
        return True

    kills = 0
    for _ in range(KILLS):
        if await all_completed():
            break
        before = email_api.requests
        proc = await start_worker(patient_server, email_api, ns, log, worker_path)

        async def working() -> bool:
            # What is left may need no email at all (a silent user's event, an
            # email sent and recorded by a worker killed before its Complete):
            # the worker then finishes it without a request to the API.
            return email_api.requests > before or await all_completed()  # noqa: B023 - called before the loop moves on

        try:
            await eventually(working, "the worker reached the email API (or finished what was left)", within=30)
            await asyncio.sleep(rng.uniform(0.0, 0.15))  # the random moment, not a wait for a condition
        finally:
            proc.kill()
            await proc.wait()
        kills += 1

    final = await start_worker(patient_server, email_api, ns, log, worker_path)
    try:
        await eventually(all_completed, "every event completed", within=60, every=0.2)
    finally:
        final.kill()  # a graceful stop is test_sigterm's subject
        await final.wait()

    print(
        f"{kills} kills; {email_api.posts} POSTs, {len(email_api.sent)} sends, "
        f"{email_api.lookups} lookups of which {email_api.lookups_found} found a send the worker had not heard of"
    )
    assert kills >= KILLS // 2, "the events finished before the worker was killed often enough"
    assert email_api.sends_to() == {email: 1 for email in emails.values()}
    assert all(len(k) == 1 for k in email_api.keys_by_recipient().values())
    for i in range(SILENT_USERS):
        row = await read_event(db, ns, f"silent-{i}")
        assert (row["disposition"], row["disposition_reason"]) == ("ignored", "the user left no email address")
