"""One phase's figures as its target table reads them: a figure's measure, or why it has no value.

The flow, bulk and tracing tables (bench/*_targets.py) each said the same
four reasons in the same order; they differ only in the phase's name, a
configuration key only a harness with the phase writes, and where the phase
keeps the figures that failed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.target_kinds import Measured, Results

Measure = Callable[[Results, Results | None], Measured]


@dataclass(frozen=True)
class PhaseFigures:
    # The phase's name, as `failed_phases` records it.
    phase: str
    # A configuration key that only a harness with this phase writes.
    config_key: str
    # Where the phase keeps, by figure, why a figure that failed alone was not measured.
    unmeasured: str

    def missing(self, bench: Results, name: str) -> Measured:
        """Why figure `name` has no value: its own failure, its phase's, or the phase did not run."""
        why = (bench.get(self.unmeasured) or {}).get(name)
        if why:
            return Measured(None, missing=f"not measured: {why}")
        failed = (bench.get("failed_phases") or {}).get(self.phase)
        if failed:
            return Measured(None, missing=f"not measured: phase {self.phase} failed: {failed}")
        if self.config_key not in bench["config"]:
            return Measured(
                None, missing=f"not measured: this run's harness had no {self.phase} phase (run `make bench`)"
            )
        return Measured(None, missing=f"not measured: no `{name}` in this run")

    def figure(self, name: str, show: Callable[[dict[str, Any]], Measured]) -> Measure:
        """The measure of one figure: `show` of it, or why it is missing."""

        def measure(bench: Results, _peers: Results | None) -> Measured:
            fig = bench["figures"].get(name)
            return show(fig) if fig else self.missing(bench, name)

        return measure
