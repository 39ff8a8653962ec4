"""The table of action cases both runtimes run (action_cases.json beside this file), as typed values."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTION_CASES_FILE = Path(__file__).with_name("action_cases.json")


@dataclass(frozen=True)
class Expected:
    """What the runtime must have done with the action; see the file's `about`."""

    performed: int
    reconciled: int
    recorded: list[str]
    raises: str | None
    final: str
    # Where raises is "unresolved": a phrase the message must hold.
    says: str | None = None


@dataclass(frozen=True)
class ActionCase:
    """One row: the ledger before, the reconcile function's answer, the body's end, and what must follow."""

    name: str
    prior: list[str]
    by: str | None
    reconcile: str | None
    perform: str
    expect: Expected


def load_action_cases() -> list[ActionCase]:
    data: dict[str, Any] = json.loads(ACTION_CASES_FILE.read_text())
    return [ActionCase(**{**row, "expect": Expected(**row["expect"])}) for row in data["cases"]]
