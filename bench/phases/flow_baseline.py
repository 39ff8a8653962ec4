"""Fair claiming over one namespace beside the claim statement before it (commit 37c09d5), same run, alternating.

The statement before flow control is kept word for word in
bench/baselines/claim_37c09d5.sql (`git show 37c09d5:server/inboxd/store/queries/claims.sql`).
Both statements run in the raw loop of bench/raw.py (psycopg, no gRPC, one
autocommit connection per worker, generic plans as inboxd's connections
have, $n placeholders on a raw cursor as inboxd sends its claim), each Claim
followed by the raw fenced completion, on the same database, each window
from the same fresh backlog, in windows A B B A ...: each statement meets as
many early and late moments of the run as the other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from bench import raw
from bench.cluster import checkpoint, execute
from bench.cpu import CpuShare
from bench.loop import Step, Throughput, closed_loop
from bench.phases.claim import prefill
from bench.record import from_throughput
from bench.run import Run
from inboxd.store.queries import numbered

BASELINE = Path(__file__).resolve().parents[1] / "baselines" / "claim_37c09d5.sql"
BASELINE_COMMIT = "37c09d5"
FAIR = "flow.claim10.fair"
BEFORE = "flow.claim10.before"
NAMESPACE = "bench/flow-one"

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]|%%")

Statement = tuple[LiteralString, tuple[str, ...]]


def baseline_statement(path: Path = BASELINE) -> Statement:
    """The kept file's claim statement, without its comment lines, with $n placeholders and their names."""
    parts = _HEADER.split(path.read_text(encoding="utf-8"))
    bodies = dict(zip(parts[1::2], parts[2::2], strict=True))
    name = next((n for n in raw.CLAIM_QUERY_NAMES if n in bodies), None)
    if name is None:
        raise RuntimeError(f"{path.name} holds none of {raw.CLAIM_QUERY_NAMES}")
    lines = [line for line in bodies[name].strip().splitlines() if not line.lstrip().startswith("--")]
    return number(f"-- inboxd: {name} (as at {BASELINE_COMMIT})\n" + "\n".join(lines))


def number(text: str) -> Statement:
    """%(name)s placeholders as $n, and the name of each n: how inboxd sends its long statements."""
    names: list[str] = []

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    # The text is this repository's own file, never a caller's.
    numbered_text: Any = _PLACEHOLDER.sub(one, text)
    return numbered_text, tuple(names)


def current_statement() -> Statement:
    """The statement this checkout's Claim of one named namespace runs."""
    return numbered(raw.claim_query(NAMESPACE)[0])


def claim_complete_steps(conns: list[raw.Conn], statement: Statement, namespace: str, batch: int) -> list[Step]:
    """Claim up to `batch` with `statement`, then complete them with the raw fenced statement."""
    text, names = statement

    def step_for(index: int, conn: raw.Conn) -> Step:
        params = raw.claim_params(namespace, batch, f"raw-{index}", names)
        values = [params[n] for n in names]

        async def step() -> int | None:
            cur = psycopg.AsyncRawCursor(conn)
            await cur.execute(text, values)
            rows = await cur.fetchall()
            columns = [c.name for c in cur.description or ()]
            ns_at, key_at, token_at = (columns.index(c) for c in ("namespace", "event_key", "claim_token"))
            claimed = [(r[ns_at], r[key_at], r[token_at]) for r in rows if r[ns_at] is not None]
            if not claimed:
                return None
            await conn.execute(
                raw.COMPLETE_MANY,
                {
                    "namespaces": [c[0] for c in claimed],
                    "event_keys": [c[1] for c in claimed],
                    "claim_tokens": [c[2] for c in claimed],
                },
            )
            return len(claimed)

        return step

    return [step_for(i, c) for i, c in enumerate(conns)]


def _order(rounds: int) -> list[str]:
    """A B B A, `rounds` times over: A is the fair statement, B the one before it."""
    return [FAIR, BEFORE, BEFORE, FAIR] * rounds


async def fair_over_before(run: Run, rounds: int, batch: int = 10) -> None:
    """Records FAIR and BEFORE: each the rate of its windows together, every window kept beside it.

    A window of each runs first and is not counted. Each window starts from the same fresh backlog
    (as raw_claim_figure's do): primed with its own statement, then VACUUM (ANALYZE), then measured.
    """
    c = run.config
    order = _order(rounds)
    statements = {FAIR: current_statement(), BEFORE: baseline_statement()}
    windows: dict[str, list[Throughput]] = {FAIR: [], BEFORE: []}
    async with raw.connections(run.url, c.claim_workers) as conns:
        steps = {name: claim_complete_steps(conns, s, NAMESPACE, batch) for name, s in statements.items()}

        async def window(index: int, name: str) -> Throughput:
            await prefill(run.url, c.claim_prefill, f"flow-one-{index}", namespace=NAMESPACE)
            await run.unmeasured(steps[name], c.prime)
            await execute(run.url, "VACUUM (ANALYZE) inbox_events", "VACUUM (ANALYZE) inbox_claims")
            await checkpoint(run.url)
            return await closed_loop(steps[name], warmup=c.warmup, duration=c.duration, probe=run.probe)

        # A window of each, thrown away: the first windows after the phases before ran slower
        # (5,179 and 6,036 rows/s, then 6,766 and 6,835 at 9bc833b), a rise no A B B A order evens out.
        for name in (FAIR, BEFORE):
            await window(-1, name)
        for index, name in enumerate(order):
            windows[name].append(await window(index, name))
    for name, results in windows.items():
        run.figures[name] = combined(results, order, name)


def combined(results: list[Throughput], order: list[str], name: str) -> dict[str, Any]:
    """One figure from a statement's windows: their units over their seconds, CPU summed, each window's rate kept."""
    used: dict[str, float] = {}
    for r in results:
        for part, seconds in (r.cpu.used if r.cpu else {}).items():
            used[part] = used.get(part, 0.0) + seconds
    whole = Throughput(
        ops=sum(r.ops for r in results),
        units=sum(r.units for r in results),
        seconds=sum(r.seconds for r in results),
        latencies=[latency for r in results for latency in r.latencies],
        cpu=CpuShare(sum(r.cpu.seconds for r in results if r.cpu), used) if used else None,
        errors=sum(r.errors for r in results),
        first_error=next((r.first_error for r in results if r.first_error), ""),
    )
    statement = f"{raw.claim_query(NAMESPACE)[0]} of this checkout" if name == FAIR else BASELINE.name
    return from_throughput(
        whole,
        "rows/s",
        windows=[round(r.units_per_s, 1) for r in results],
        order="".join("A" if n == FAIR else "B" for n in order),
        statement=statement,
    )
