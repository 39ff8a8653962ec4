"""Scenario 8: workers killed around an external send still send exactly one email per event.

The example email worker (clients/python/examples/email_worker.py) runs as two
processes against a fake email API that honours `Idempotency-Key` and answers
a send-status lookup by key. The API holds each first answer back a moment
after it has recorded the send, so a kill there leaves a worker that sent
without hearing back; and every fifth first send is answered 502, a gateway
that lost the service's answer, so an UNKNOWN outcome comes up on every run.
Workers are SIGKILLed at seeded moments just after they reach the API, and
started again. In the end every recipient got exactly one email under exactly
one idempotency key, every action is SUCCEEDED, and the uncertain ones were
settled by looking the send up (reconciliation), not by sending again.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from inboxd_client import accept_request
from tests.client.fake_email_api import SEND_PATH, FakeEmailApi, Sent
from tests.harness import REPO, eventually
from tests.reliability import ledger
from tests.reliability.rig import PyProcess, client, namespace, processes, query, serving, states

SCENARIO = "external effects"
EXAMPLE = REPO / "clients" / "python" / "examples" / "email_worker.py"
USERS = 60
SILENT_USERS = 2  # no email address: completed as IGNORED, never mailed
WORKERS = 2
KILLS = 8
LOST_ANSWER_EVERY = 5
ACTION = "send-welcome:v1"


class LossyGatewayEmailApi(FakeEmailApi):
    """The fake API behind a gateway that answers 502 for every Nth first send, after the send happened."""

    def __init__(self, *, lost_answer_every: int, answer_delay: tuple[float, float], seed: int) -> None:
        super().__init__(answer_delay=answer_delay, seed=seed)
        self.lost_answer_every = lost_answer_every
        self.first_sends = 0
        self.lost_answers = 0

    def reached_again(self) -> Callable[[], bool]:
        """A check: a request has come in since now."""
        before = self.requests
        return lambda: self.requests > before

    def handle_post(self, request: BaseHTTPRequestHandler) -> None:
        key = request.headers.get("Idempotency-Key", "")
        body = json.loads(request.rfile.read(int(request.headers.get("Content-Length", "0"))))
        if request.path != SEND_PATH or not key:
            self._answer(request, 400, {"error": "POST /v1/messages with an Idempotency-Key"})
            return
        with self._lock:
            self.posts += 1
            first = key not in self.sent
            lose = False
            if first:
                self.sent[key] = Sent(key, body["to"], f"msg_{len(self.sent) + 1}")
                self.first_sends += 1
                lose = self.first_sends % self.lost_answer_every == 0
                self.lost_answers += lose
            sent = self.sent[key]
            delay = self._rng.uniform(*self.answer_delay) if first else 0.0
        if delay:
            threading.Event().wait(delay)
        if lose:
            self._answer(request, 502, {"error": "bad gateway"})
        else:
            self._answer(request, 200, {"id": sent.message_id})


async def test_workers_killed_around_external_sends_send_exactly_once_and_reconcile_unknown_outcomes(
    reliable_url: str, tmp_path: Path
) -> None:
    tally = ledger.open_tally(SCENARIO)
    rng = ledger.rng_for(SCENARIO)
    ns = namespace(SCENARIO)
    api = LossyGatewayEmailApi(
        lost_answer_every=LOST_ANSWER_EVERY, answer_delay=(0.02, 0.08), seed=rng.randrange(2**31)
    )
    api.start()
    emails = {f"user-{i:03d}": f"user-{i:03d}@example.com" for i in range(USERS)}
    keys = [*emails, *(f"silent-{i}" for i in range(SILENT_USERS))]
    # Short backoff: an UNKNOWN send fails its attempt, and the retry should come soon.
    settings = {"INBOXD_MAX_ATTEMPTS": "100", "INBOXD_BACKOFF_BASE": "100ms", "INBOXD_BACKOFF_CAP": "1s"}
    try:
        async with serving(reliable_url, **settings) as server, processes() as started:
            async with client(server.target) as inbox:
                requests = [accept_request(ns, k, "user.signed_up", {"email": e, "name": k}) for k, e in emails.items()]
                requests += [accept_request(ns, k, "user.signed_up", {"name": "nobody"}) for k in keys[USERS:]]
                answer = await inbox.accept_batch(requests)
                acked = {r.event_key for r, a in zip(requests, answer.results, strict=True) if a.outcome}
            tally.deliveries += len(requests)
            env = {
                "INBOXD_TARGET": server.target,
                "INBOXD_NAMESPACE": ns,
                "EMAIL_API_URL": api.url,
                "INBOXD_CONCURRENCY": "2",
                "INBOXD_LEASE": "2",
                "INBOXD_WAIT": "1",
                "LOG_LEVEL": "WARNING",
            }

            async def launch() -> PyProcess:
                proc = PyProcess([str(EXAMPLE)], tmp_path / "email-workers.log", env=env)
                started.append(proc)
                return await proc.start()

            async def all_completed() -> bool:
                found = await states(reliable_url, ns)
                return all(found.get(k) == "completed" for k in keys)

            live = [await launch() for _ in range(WORKERS)]
            kills = 0
            for _ in range(KILLS):
                if await all_completed():
                    break
                await eventually(api.reached_again(), "a worker reached the email API", within=30.0, every=0.01)
                await asyncio.sleep(rng.uniform(0.0, 0.15))  # the seeded moment, not a wait for a condition
                victim = rng.randrange(len(live))
                await live[victim].kill()
                kills += 1
                live[victim] = await launch()

            await eventually(all_completed, "every event completed", within=90.0, every=0.25)
            for proc in live:
                await proc.stop()
    finally:
        api.stop()

    stored = await states(reliable_url, ns)
    actions = await query(
        reliable_url,
        "SELECT event_key, state, idempotency_key, detail FROM inbox_actions WHERE namespace = %s AND action = %s",
        (ns, ACTION),
    )
    action_state = {str(k): str(s) for k, s, _, _ in actions}
    reconciled = sum(1 for _, _, _, detail in actions if str(detail).startswith("reconciled"))
    sends = api.sends_to()
    keys_by_recipient = api.keys_by_recipient()

    tally.events += len(keys)
    tally.account(acked, {k for k, s in stored.items() if s == "completed"})
    tally.duplicated += len(set(stored) - set(keys))
    tally.count_effects(Counter({key: sends[email] for key, email in emails.items()}))
    tally.repeated += sum(len(k) - 1 for k in keys_by_recipient.values())  # a second key is a second send waiting
    tally.note("workers SIGKILLed", kills)
    tally.note("POSTs", api.posts)
    tally.note("POSTs absorbed by Idempotency-Key", api.posts - len(api.sent))
    tally.note("answers lost after the send (502)", api.lost_answers)
    tally.note("lookups that found a send the worker had not heard of", api.lookups_found)
    tally.note("actions settled by reconciliation", reconciled)

    assert kills >= KILLS // 2, "the events finished before the workers were killed often enough"
    assert sends == Counter(dict.fromkeys(emails.values(), 1)), "some recipient got no email, or more than one"
    assert all(len(k) == 1 for k in keys_by_recipient.values()), "one event's send went out under two keys"
    assert action_state == dict.fromkeys(emails, "succeeded"), "an action was left INTENDED, UNKNOWN or FAILED"
    assert api.lost_answers >= 1 and api.lookups_found >= api.lost_answers, "an UNKNOWN outcome was not looked up"
    assert reconciled >= api.lost_answers
    tally.close()
