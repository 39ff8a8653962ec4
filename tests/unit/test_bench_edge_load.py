"""Issue 44's generator and bare app, real processes on a real port: every answer framed and counted, the CPU of
both read over the window the generator announced.
"""

from __future__ import annotations

from pathlib import Path

from bench.cpu import CpuProbe
from bench.edge_procs import HttpLoad, bare_app, run_http


async def test_the_generator_counts_the_bare_apps_answers_over_its_window_with_both_processes_cpu(
    tmp_path: Path,
) -> None:
    probe = CpuProbe()
    async with bare_app(tmp_path) as bare:
        load = HttpLoad(bare.port, connections=8, warmup_s=0.3, duration_s=1.0, deliveries=300, prefix="test")
        result = await run_http(load, probe, bare.cpu_parts("bare"))
    report = result.report
    assert report["errors"] == 0, report["first_error"]
    assert report["ops"] > 0
    # 300 signed deliveries run out within the second on any machine: the rest are sent again, and counted.
    assert report["sent"] > report["deliveries"] == 300
    assert report["repeated"] == report["sent"] - 300
    assert result.cpu is not None
    assert result.cpu.used["bare"] > 0 and result.cpu.used["loadgen"] > 0
    assert 0.5 < result.cpu.seconds < 5.0
