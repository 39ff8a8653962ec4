"""The page's edge section (issue 44): how the edge, the bare app and the generator were run, each system's
windows with where the CPU went, and the edge's profile.

Only what the run stored: a figure not measured says so, never a number.
"""

from __future__ import annotations

from typing import Any

from bench import thread_time
from bench.edge_targets import worker_split
from bench.figures import cpu_line
from bench.phases.edge import BARE, EXTRA, NAMES, ONE, UNIT, figure_name
from bench.record import per_op_us

PER_DELIVERY = ("edge", "bare", "server", "postgres", "loadgen")
LABEL = {"edge": "edge", "bare": "bare app", "server": "inboxd", "postgres": "PostgreSQL", "loadgen": "generator"}


def edge(bench: dict[str, Any]) -> list[str]:
    figs = bench["figures"]
    facts: dict[str, Any] = bench.get(EXTRA) or {}
    failed = (bench.get("failed_phases") or {}).get("edge")
    if not any(name in figs for name in NAMES) and not facts and not failed:
        return []
    out = ["## The edge", "", *_method(bench, facts), ""]
    if failed:
        out += [f"Phase `edge` failed: `{failed}`", ""]
    out += [
        "| figure | windows (rate) | rate | p50 / p99 (worst window) | CPU (% of a core) | CPU per delivery "
        "| generator CPU per request | errors | sent again |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in NAMES:
        f = figs.get(name)
        if not f:
            continue
        windows = ", ".join(f"{w['value']:,.0f}" for w in f.get("windows", []))
        errors = f"{f['errors']} (first: {f['first_error']})" if f["errors"] else "0"
        gen = f.get("generator_cpu_us_per_op")
        out.append(
            f"| `{name}` | {windows} | {f['value']:,.0f} {f['unit']} | {f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms | "
            f"{cpu_line(f)} | {_per_delivery(f)} | {f'{gen:,.0f} µs' if gen else '-'} | {errors} | "
            f"{f.get('repeated', 0):,} |"
        )
    out.append("")
    out += _workers(figs)
    out += _headroom(figs)
    out += _stored(figs, facts)
    out += _profile(facts.get("profile"))
    return out


def _method(bench: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    route = facts.get("route") or {}
    conns = facts.get("connections", "?")
    deliveries = facts.get("deliveries_per_window")
    shown_deliveries = f"{deliveries:,}" if isinstance(deliveries, int) else "?"
    return [
        "- Three systems, each started once for the phase: A, a bare aiohttp app (`bench/bare_app.py`, its own "
        'process) that reads each body and answers 200 `{"outcome": "accepted"}`, nothing else, on asyncio\'s '
        "own event loop as the edge runs; B, `inboxd-edge` as one process; C, `inboxd-edge --workers 2` (SO_REUSEPORT "
        "spreads the connections between the two processes). Both edges forward to this run's inboxd (one "
        "process) over their default four AcceptStreams, and log one line per request to a file, as an operator "
        "runs them.",
        f'- The route: `scheme = "{route.get("scheme", "github")}"` at `{route.get("path", "?")}`, one namespace '
        f"(`{route.get('namespace', '?')}`), `event_type = \"const:push\"`, the key the preset's: the body's "
        f"SHA-256. Each delivery is a GitHub push of {route.get('body_bytes', '?')} bytes of JSON with its own "
        "commit id (so its own event), `X-GitHub-Event`, `X-GitHub-Delivery` and `X-Hub-Signature-256` as GitHub "
        "sends them.",
        f"- The generator (`bench/edge_loadgen.py`, a Python process of its own on uvloop) signs "
        f"{shown_deliveries} deliveries before each window, then writes them, ready bytes, on {conns} keep-alive "
        "HTTP/1.1 connections, one request in flight on each (a closed loop), framing each answer by its "
        "Content-Length. The same generator and the same requests go to all three systems; any answer but 200 "
        "is an error, and a delivery sent twice in a window (when a window outruns the signed ones) is counted "
        'under "sent again": to an edge a DUPLICATE (cheaper than a first delivery), to the bare app the same work.',
        f"- Windows {(bench['figures'].get(figure_name(ONE)) or {}).get('order', 'A B C C B A')} (A bare app, B one "
        f"edge process, C `--workers 2`), each {facts.get('warmup_s', '?')} s of warm-up then a "
        f"{facts.get('window_s', '?')} s window, a CHECKPOINT before each. A figure is its windows' answers over "
        "their seconds, CPU summed.",
        "- CPU: each process's utime + stime from /proc at the window's two ends: `edge` is every edge process "
        "(under `--workers 2`, its parent and both workers, split below), `bare` the bare app, `server` inboxd, "
        "`loadgen` the generator, `client` this harness, `other` everything else on the machine. Per delivery: "
        "the part's CPU over the deliveries answered 200 in the window.",
    ]


def _per_delivery(fig: dict[str, Any]) -> str:
    found = [f"{LABEL[p]} {us:,.0f} µs" for p in PER_DELIVERY if (us := per_op_us(fig, p)) is not None and us >= 0.5]
    return ", ".join(found) or "-"


def _workers(figs: dict[str, Any]) -> list[str]:
    two = figs.get(figure_name("workers2"))
    split = worker_split(two) if two else ""
    if not two or not split:
        return []
    return [
        f"`--workers 2`: each edge process's CPU over its windows, in % of a core: {split} (the parent serves no "
        "webhook; SO_REUSEPORT hands each of the generator's connections to one worker).",
        "",
    ]


def _headroom(figs: dict[str, Any]) -> list[str]:
    bare, one = figs.get(figure_name(BARE)), figs.get(figure_name(ONE))
    if not bare or not one or not one["value"]:
        return []
    gen = bare.get("generator_cpu_us_per_op")
    spent = f", spending {gen:,.0f} µs of its own CPU per request" if gen else ""
    return [
        f"The generator's headroom: it drove the bare app at {bare['value']:,.0f} {UNIT}, "
        f"{bare['value'] / one['value']:.1f}x the one-process edge's {one['value']:,.0f} {UNIT}{spent}: the "
        "edge's rate is the edge's, not the generator's.",
        "",
    ]


def _stored(figs: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """What inboxd held after the windows beside what the edges were sent: each delivery is one event."""
    if "stored_events" not in facts:
        return []
    edges = [f for name in (figure_name(ONE), figure_name("workers2")) if (f := figs.get(name))]
    distinct = sum(int(f.get("sent", 0)) - int(f.get("repeated", 0)) for f in edges)
    return [
        f"After the windows inboxd held {facts['stored_events']:,} events in the edges' namespace, for "
        f"{distinct:,} distinct deliveries the generator sent the two edges (warm-ups included).",
        "",
    ]


def _profile(profile: dict[str, Any] | None) -> list[str]:
    if not profile:
        return []
    out = [f"### The edge's profile: {profile.get('workload', '?')}", ""]
    if "error" in profile:
        return [*out, f"No profile: {profile['error']}", ""]
    out += [
        f"py-spy (`-f raw`, {profile.get('rate', '?')} samples a second for {profile.get('seconds', '?')} s, "
        f"{profile['samples']:,} samples; raw stacks in `profiles/{profile.get('raw', 'edge.txt.gz')}`) on the one "
        "edge process, in a window of its own after the measured ones. As the server's profiles: only Python "
        "frames are seen (time in C, grpc's core and the kernel included, is charged to the Python frame that "
        "called it), and by part a sample counts for the part of the frame nearest its leaf that belongs to one.",
        "",
        "| own samples by part | % |",
        "|---|---|",
        *[f"| {part} | {pct:.1f}% |" for part, pct in profile.get("parts", {}).items()],
        "",
    ]
    threads = profile.get("threads")
    if threads:
        share = thread_time.waiting_share(threads)
        waiting = f" ({share:.0f}% of the event loop's samples were waiting, not CPU)" if share is not None else ""
        out += [f"Its threads over the window: {thread_time.described(threads)}{waiting}.", ""]
    for key, title in (("own", "by own samples"), ("inclusive", "by inclusive samples")):
        rows = profile.get(key) or []
        out += [f"| top frames {title} | % |", "|---|---|"]
        out += [f"| `{f['function']}` ({f['file']}) | {f['percent']:.1f}% |" for f in rows]
        out.append("")
    return out
