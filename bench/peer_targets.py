"""Issue 47's rows against the peers: inboxd over the best of PgQueuer, Procrastinate, pg-boss and graphile-worker.

Every ratio is of one `make bench-peers` run. The best peer is the one
fastest on that row (the lowest p99 for latency), whichever it is; a peer
that did not run is left out, never guessed. Names starting "inboxd" are
inboxd's own ways (the Node generator, grpc.aio, Work streams).
"""

from __future__ import annotations

from bench.figures import Figures, peer_rates
from bench.target_kinds import Bar, Measured, Results, Target

PEERS = ("pgqueuer", "procrastinate", "pg-boss", "graphile-worker")
# The page's names for the figures' systems.
LABELS = {
    "inboxd": "inboxd",
    "inboxd-python": "inboxd (grpc.aio)",
    "inboxd-work": "inboxd (Work)",
    "pgqueuer": "PgQueuer",
    "procrastinate": "Procrastinate",
    "pg-boss": "pg-boss",
    "graphile-worker": "graphile-worker",
}
NOT_RUN = "not measured: run `make bench-peers`"


def _without_node_peers(peers: Results | None) -> str | None:
    """Why a run cannot name the best of all four peers, or None when it can."""
    if peers is None:
        return NOT_RUN
    if peers.get("node_peer_versions"):
        return None
    why = peers.get("node_peers_missing") or "this peers run predates pg-boss and graphile-worker"
    return f"not measured: {why}; run `make bench-peers`"


def best_peer(values: dict[str, float], *, lowest: bool = False) -> tuple[str, float] | None:
    """The best peer's name and figure (the highest, or with `lowest` the lowest), inboxd's own left out."""
    # The drain's rounds name the Python peers as their libraries spell themselves (PgQueuer).
    found = {k: v for k, v in values.items() if k.lower() in PEERS and v > 0}
    if not found:
        return None
    pick = min if lowest else max
    return pick(found.items(), key=lambda kv: kv[1])


def enqueue_rates(figs: Figures, shape: str) -> dict[str, float]:
    """Each system's enqueue figure of `shape` (e.g. single.c64, batch100.c16), where it ran."""
    found: dict[str, float] = {}
    for name, fig in figs.items():
        kind, _, rest = name.partition(".")
        system, _, its_shape = rest.partition(".")
        if kind == "enqueue" and its_shape == shape and fig.get("ops", 1):
            found[system] = float(fig["value"])
    return found


def latency_p99s(figs: Figures) -> dict[str, float]:
    return {
        name.removeprefix("latency."): float(fig["p99_ms"]) for name, fig in figs.items() if name.startswith("latency.")
    }


def ours(values: dict[str, float], names: tuple[str, ...], *, lowest: bool = False) -> tuple[str, float] | None:
    """inboxd's best of its ways `names` that ran."""
    found = {n: values[n] for n in names if values.get(n)}
    if not found:
        return None
    pick = min if lowest else max
    return pick(found.items(), key=lambda kv: kv[1])


def label(system: str) -> str:
    return LABELS.get(system.lower(), system)


def over_best(
    values: dict[str, float], names: tuple[str, ...], unit: str, *, lowest: bool = False, note: str = ""
) -> Measured:
    """inboxd's figure (its best of `names`) over the best peer's, shown with both figures and who they are."""
    mine, theirs = ours(values, names, lowest=lowest), best_peer(values, lowest=lowest)
    if mine is None or theirs is None:
        absent = "inboxd" if mine is None else "any peer"
        return Measured(None, missing=f"not measured in the peers run: no figure for {absent}")
    v = mine[1] / theirs[1]
    fmt = "{:,.1f}" if unit == "ms" else "{:,.0f}"
    shown = (
        f"{v:.2f}x ({label(mine[0])} {fmt.format(mine[1])} ÷ {label(theirs[0])} {fmt.format(theirs[1])} {unit}{note})"
    )
    return Measured(v, shown)


def _single(bench: Results, peers: Results | None) -> Measured:
    if (why := _without_node_peers(peers)) is not None or peers is None:
        return Measured(None, missing=why or NOT_RUN)
    top = max(peers["config"]["peer_enqueue_callers"])
    return over_best(enqueue_rates(peers["figures"], f"single.c{top}"), ("inboxd",), "tx/s", note=f", {top} callers")


def _batch(bench: Results, peers: Results | None) -> Measured:
    if (why := _without_node_peers(peers)) is not None or peers is None:
        return Measured(None, missing=why or NOT_RUN)
    c = peers["config"]
    shape = f"batch{c['batch_rows']}.c{c['batch_clients']}"
    rates = enqueue_rates(peers["figures"], shape)
    return over_best(rates, ("inboxd",), "rows/s", note=f", {c['batch_clients']} callers")


def _drain(bench: Results, peers: Results | None) -> Measured:
    if (why := _without_node_peers(peers)) is not None or peers is None or not peers.get("rounds"):
        return Measured(None, missing=why or NOT_RUN)
    return over_best(peer_rates(peers), ("inboxd-work",), "jobs/s")


def _latency(bench: Results, peers: Results | None) -> Measured:
    if (why := _without_node_peers(peers)) is not None or peers is None:
        return Measured(None, missing=why or NOT_RUN)
    return over_best(latency_p99s(peers["figures"]), ("inboxd", "inboxd-work"), "ms", lowest=True, note=" p99")


def peer_targets(bench: Results) -> list[Target]:
    c = bench["config"]
    top = max(c["concurrency"])
    return [
        Target(
            "47",
            f"single-event Accept ÷ the best peer's single enqueue, {top} callers (make bench-peers)",
            ">= 1.5x",
            _single,
            Bar(1.5),
        ),
        Target(
            "47",
            f"AcceptBatch of {c['batch_rows']} ÷ the best peer's batch enqueue of {c['batch_rows']} (make bench-peers)",
            ">= 1.2x",
            _batch,
            Bar(1.2),
        ),
        Target(
            "47",
            "drain (Work streams) ÷ the best peer's drain (make bench-peers)",
            ">= 2x",
            _drain,
            Bar(2.0),
        ),
        Target(
            "47",
            "enqueue -> a waiting worker starts, p99 ÷ the best peer's, idle queue (make bench-peers)",
            "<= 0.5x",
            _latency,
            Bar(0.5, at_most=True),
        ),
    ]
