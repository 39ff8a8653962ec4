"""The targets of issue 29 (raw bodies), each a figure of one run with its bar, but one across two runs.

As in targets.py: a figure that could not be measured says why, never a
number. The exception to "the same run" is unary Accept against the same
before the change, which no run can measure twice: its "before" is the
figure last published before raw bodies, kept with its commit, date and
machine in bench/baselines/before_raw_bodies.json, and its row says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.target_kinds import Bar, Measured, Results, Target, _batched_event_cpu, _Ratio

BEFORE = Path(__file__).resolve().parent / "baselines" / "before_raw_bodies.json"
PEER = "pgqueuer"


def load_before(path: Path = BEFORE) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def machine_note(run: dict[str, Any]) -> str:
    """A run's machine as its header states it: cores, CPU, memory, PostgreSQL, how busy it was at the start."""
    m, pg = run.get("machine") or {}, run.get("postgres") or {}
    busy = run.get("busy_before_start")
    return (
        f"{m.get('nproc', '?')} cores ({m.get('cpu', '?')}), {m.get('memory_gib', '?')} GiB, PostgreSQL "
        f"{pg.get('server_version', '?')} fsync={pg.get('fsync', '?')} synchronous_commit="
        f"{pg.get('synchronous_commit', '?')}"
        + (f", other processes {busy:.0f}% of a core at its start" if busy is not None else "")
    )


def _batch_over_peer(bench: Results, peers: Results | None) -> Measured:
    """The peers run's AcceptBatch (the Node generator) over PgQueuer's batch enqueue, same callers and rows."""
    if peers is None:
        return Measured(None, missing="not measured: run `make bench-peers`")
    c = peers["config"]
    shape = f"batch{c['batch_rows']}.c{c['batch_clients']}"
    figs = peers["figures"]
    ours, theirs = figs.get(f"enqueue.inboxd.{shape}"), figs.get(f"enqueue.{PEER}.{shape}")
    if not ours or not theirs or not theirs["value"]:
        absent = f"enqueue.inboxd.{shape}" if not ours else f"enqueue.{PEER}.{shape}"
        return Measured(None, missing=f"not measured in the peers run: no `{absent}`")
    v = float(ours["value"]) / float(theirs["value"])
    shown = f"{v:.2f}x ({ours['value']:,.0f} ÷ {theirs['value']:,.0f} {theirs['unit']}, {c['batch_clients']} callers)"
    return Measured(v, shown)


class AcrossRuns:
    """This run's unary Accept over the same figure of the run before the change (`before`, as stored)."""

    def __init__(self, name: str, before: dict[str, Any] | None) -> None:
        self.name, self.before = name, before

    def __call__(self, bench: Results, _peers: Results | None) -> Measured:
        b = self.before
        if b is None:
            return Measured(None, missing=f"not measured: no {BEFORE.name} (the figure from before the change)")
        if b["figure"] != self.name:
            return Measured(None, missing=f"not measured: before is `{b['figure']}`, this run's is `{self.name}`")
        fig = bench["figures"].get(self.name)
        if fig is None:
            return Measured(None, missing=f"not measured: no `{self.name}` in this run")
        v = float(fig["value"]) / float(b["value"])
        return Measured(
            v,
            f"{v:.2f}x ({fig['value']:,.0f} {fig['unit']} on {bench.get('date', '?')} ÷ {b['value']:,.0f} "
            f"{b['unit']} on {b['date']})",
        )


def raw_body_targets(bench: Results, before_path: Path = BEFORE) -> list[Target]:
    """Issue 29's rows; the figure from before the change is read from `before_path`."""
    c = bench["config"]
    top = max(c["concurrency"])
    before = load_before(before_path)
    unary = f"inboxd.accept.c{top}"
    then = (
        f"commit {before['git']}'s run of {before['date']} ({machine_note(before)})"
        if before
        else "the last run before the change (not stored)"
    )
    return [
        Target(
            "29",
            f"AcceptBatch of {c['batch_rows']} ÷ PgQueuer's batch enqueue of {c['batch_rows']}, same callers "
            "(make bench-peers)",
            ">= 1.2x",
            _batch_over_peer,
            Bar(1.2),
            ("inboxd.accept_batch",),
            "accept_batch",
        ),
        Target(
            "29",
            f"AcceptBatch of {c['batch_rows']} ÷ raw {c['batch_rows']}-row INSERT",
            ">= 0.6x",
            _Ratio("inboxd.accept_batch", "raw.insert_batch"),
            Bar(0.6),
            ("inboxd.accept_batch", "raw.insert_batch"),
            "accept_batch",
        ),
        Target(
            "29",
            f"unary Accept at {top} callers ÷ the same before raw bodies: a ratio across two runs, this one "
            f"of {bench.get('date', '?')} (its machine in the header above) over {then}",
            ">= 0.95x",
            AcrossRuns(unary, before),
            Bar(0.95),
            (unary,),
            "accept",
        ),
        Target(
            "29",
            "server CPU per batched event",
            "<= 15 µs",
            _batched_event_cpu,
            Bar(15.0, at_most=True),
            ("inboxd.accept_batch",),
            "accept_batch",
        ),
    ]
