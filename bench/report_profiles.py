"""The page's server profiles: py-spy's samples by part and frame, before and after, and how much of them
was CPU (the threads' time on a CPU against their time waiting for one)."""

from __future__ import annotations

from typing import Any

from bench import thread_time


def _frames(profile: dict[str, Any] | None, key: str) -> dict[str, float]:
    if not profile or key not in profile:
        return {}
    return {f"`{f['function']}` ({f['file']})": float(f["percent"]) for f in profile[key]}


def profiles(bench: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    after = bench.get("profiles", {})
    earlier = (before or {}).get("profiles", {})
    if not after and not earlier:
        return []
    out = [
        "## Server profiles",
        "",
        "py-spy (`-f raw`, idle threads not sampled) on the server process while the Node generator drives "
        "the workload, in windows of their own after the measured ones. Only Python frames are seen: time in C "
        "(grpc's core, psycopg's C parts, the kernel) is charged to the Python frame that called it. Own: the "
        "function was the leaf; inclusive: it was on the stack (the event loop's, runpy's and threading's "
        "frames, on every stack, are left out). In % of the profile's samples. A leaf of `Handle._run` or "
        "`Thread.run` is time in code py-spy does not see (C, Cython) called straight from an event-loop "
        "callback or a thread; which code, the profile does not say. By part: a sample counts for the part "
        "(inboxd, psycopg, grpc, asyncio, logging, json, prometheus_client) of the frame nearest its leaf that "
        "belongs to one; other standard modules (re, threading, enum ...) count for their caller's part.",
        "",
        "A thread that is runnable but waits for a core is sampled too, in the frame it stopped in: on these two "
        "cores a `send` to PostgreSQL often hands the core to the backend it woke, and the server's thread waits "
        "there. Each profile says, from the kernel's schedstat over the same window, how much of its threads' "
        "time was on a CPU and how much waiting for one (bench/thread_time.py): the waiting share of the event "
        "loop's samples is not CPU, whichever frame it landed in.",
    ]
    if before:
        busy = before.get("busy_before_start")
        busy_then = f" (other processes used {busy:.0f}% of a core just before it started)" if busy is not None else ""
        out += [
            "",
            f"Before: `python -m bench profile` at commit {before['git']} on {before['date']}{busy_then}. "
            "After: this run.",
        ]
    out.append("")
    for name in dict.fromkeys([*after, *earlier]):
        now, then = after.get(name), earlier.get(name)
        label = (now or then or {}).get("workload", name)
        failed = [f"{which}: {p['error']}" for which, p in (("before", then), ("after", now)) if p and "error" in p]
        now = now if now and "error" not in now else None
        then = then if then and "error" not in then else None
        samples = " / ".join(
            f"{which} {p['samples']:,} samples" for which, p in (("before", then), ("after", now)) if p
        )
        out += [f"### {label} (`{name}`; {samples or 'no samples'})", ""]
        if failed:
            out += [f"No profile ({'; '.join(failed)}).", ""]
        parts_then, parts_now = (then or {}).get("parts", {}), (now or {}).get("parts", {})
        out += ["| own samples by part | before | after |", "|---|---|---|"]
        for part in dict.fromkeys([*parts_now, *parts_then]):
            out.append(f"| {part} | {_pct(parts_then.get(part))} | {_pct(parts_now.get(part))} |")
        out.append("")
        out += _thread_rows(then, now)
        for key, title in (("own", "by own samples"), ("inclusive", "by inclusive samples")):
            rows_then, rows_now = _frames(then, key), _frames(now, key)
            out += [f"| top frames {title} | before | after |", "|---|---|---|"]
            for frame in dict.fromkeys([*rows_now, *rows_then]):
                out.append(f"| {frame} | {_pct(rows_then.get(frame))} | {_pct(rows_now.get(frame))} |")
            out.append("")
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _thread_rows(then: dict[str, Any] | None, now: dict[str, Any] | None) -> list[str]:
    """The threads' time over the profile's window, in % of it (none when neither side measured it)."""
    times_then, times_now = (then or {}).get("threads", {}), (now or {}).get("threads", {})
    if not times_then and not times_now:
        return []
    out = ["| the server's threads over the window | before | after |", "|---|---|---|"]
    for kind in dict.fromkeys([*times_now, *times_then]):
        for key, what in (("on_cpu_percent", "on a CPU"), ("waiting_percent", "waiting for a CPU")):
            out.append(
                f"| {kind}: {what} | {_pct((times_then.get(kind) or {}).get(key))} "
                f"| {_pct((times_now.get(kind) or {}).get(key))} |"
            )
    share_then, share_now = thread_time.waiting_share(times_then), thread_time.waiting_share(times_now)
    out.append(f"| the event loop's samples that were waiting, not CPU | {_pct(share_then)} | {_pct(share_now)} |")
    return [*out, ""]
