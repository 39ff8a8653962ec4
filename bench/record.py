"""One measured figure as it is stored in bench/results/*.json: the rate, latencies, and where the CPU went."""

from __future__ import annotations

from typing import Any

from bench.loop import Throughput
from bench.node_load import NodeResult


def from_throughput(result: Throughput, unit: str, **extra: Any) -> dict[str, Any]:
    """A figure driven from this Python process (the raw baseline, the peers, grpc.aio)."""
    value = result.units_per_s if unit == "rows/s" else result.ops_per_s
    client = result.cpu.used.get("client", 0.0) if result.cpu else 0.0
    return {
        "value": round(value, 1),
        "unit": unit,
        "ops": result.ops,
        "units": result.units,
        "seconds": round(result.seconds, 3),
        "p50_ms": round(result.percentile_ms(0.50), 3),
        "p99_ms": round(result.percentile_ms(0.99), 3),
        "errors": result.errors,
        "first_error": result.first_error,
        "cpu": result.cpu.to_json() if result.cpu else None,
        "generator": "python",
        "generator_cpu_us_per_op": round(1e6 * client / result.ops, 1) if result.ops else None,
        **extra,
    }


def from_node(result: NodeResult, unit: str, **extra: Any) -> dict[str, Any]:
    """A figure driven by the Node generator; its CPU per call is the generator's own account."""
    r = result.report
    seconds = result.seconds
    value = (result.units if unit == "rows/s" else result.ops) / seconds if seconds > 0 else 0.0
    return {
        "value": round(value, 1),
        "unit": unit,
        "ops": result.ops,
        "units": result.units,
        "seconds": round(seconds, 3),
        "p50_ms": round(float(r["p50_ms"]), 3),
        "p90_ms": round(float(r["p90_ms"]), 3),
        "p99_ms": round(float(r["p99_ms"]), 3),
        "errors": result.errors,
        "first_error": r["first_error"],
        "cpu": result.cpu.to_json() if result.cpu else None,
        "generator": f"node {r['transport']} ({_count(r['threads'], 'thread')}, "
        f"{_count(r['threads'] * r['channels_per_thread'], 'connection')})",
        "generator_cpu_us_per_op": round(float(r["cpu_us_per_op"]), 1) if r.get("cpu_us_per_op") else None,
        **extra,
    }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def server_us_per(fig: dict[str, Any], part: str = "server") -> float | None:
    """CPU µs of `part` per unit: per row for rows/s figures, per request otherwise."""
    cpu = fig.get("cpu")
    count = fig.get("units") if fig.get("unit") == "rows/s" else fig.get("ops")
    if not cpu or not count or part not in cpu["used"]:
        return None
    return 1e6 * float(cpu["used"][part]) / float(count)


def per_op_us(fig: dict[str, Any], part: str) -> float | None:
    """CPU µs of `part` per request (per call, whatever the unit)."""
    cpu = fig.get("cpu")
    ops = fig.get("ops")
    if not cpu or not ops or part not in cpu["used"]:
        return None
    return 1e6 * float(cpu["used"][part]) / float(ops)


def percent_of_core(fig: dict[str, Any], part: str) -> float | None:
    cpu = fig.get("cpu")
    if not cpu or not cpu["seconds"]:
        return None
    return 100.0 * float(cpu["used"].get(part, 0.0)) / float(cpu["seconds"])


def combined(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure from a server's windows: their units over their seconds, CPU summed, each window kept.

    Percentiles do not add up: p50 and p99 are the worst window's, and each window's are kept beside.
    """
    unit = windows[0]["unit"]
    seconds = sum(float(w["seconds"]) for w in windows)
    ops = sum(int(w["ops"]) for w in windows)
    units = sum(int(w["units"]) for w in windows)
    used: dict[str, float] = {}
    cpu_seconds = 0.0
    for w in windows:
        cpu = w.get("cpu") or {"seconds": 0.0, "used": {}}
        cpu_seconds += float(cpu["seconds"])
        for part, s in cpu["used"].items():
            used[part] = used.get(part, 0.0) + float(s)
    count = units if unit == "rows/s" else ops
    return {
        "value": round(count / seconds, 1) if seconds > 0 else 0.0,
        "unit": unit,
        "ops": ops,
        "units": units,
        "seconds": round(seconds, 3),
        "p50_ms": max(float(w["p50_ms"]) for w in windows),
        "p99_ms": max(float(w["p99_ms"]) for w in windows),
        "errors": sum(int(w["errors"]) for w in windows),
        "first_error": next((w["first_error"] for w in windows if w["first_error"]), ""),
        "cpu": {"seconds": round(cpu_seconds, 3), "used": {k: round(v, 3) for k, v in used.items()}},
        "generator": windows[0].get("generator"),
        "windows": [
            {k: w[k] for k in ("value", "seconds", "p50_ms", "p99_ms", "cpu", "position") if k in w} for w in windows
        ],
    }
