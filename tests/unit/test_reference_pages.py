"""The reference pages stay true: the CLI page names every `inboxd` subcommand, the metrics page every alert."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from inboxd.serving.cli import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def _subcommands() -> set[str]:
    (action,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(action.choices)


def test_the_cli_page_lists_every_inboxd_subcommand_and_no_other() -> None:
    rows = re.findall(r"^\| (.+?) \|", PAGE.read_text(), flags=re.MULTILINE)
    listed = {name for row in rows for name in re.findall(r"`inboxd ([a-z-]+)", row)}
    assert listed == _subcommands(), f"missing: {_subcommands() - listed}; not a command: {listed - _subcommands()}"


def test_the_metrics_page_links_every_shipped_alert_to_its_runbook() -> None:
    import yaml

    rules = yaml.safe_load((PAGE.parents[2] / "deploy" / "prometheus" / "alerts.yml").read_text())
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    page = (PAGE.parent / "metrics.md").read_text()
    # The anchor is checked by the strict site build (make docs-check); here, that each alert has its link.
    linked = set(re.findall(r"\[(Inboxd\w+)\]\(\.\./operations\.md#(?:inboxd\w+)\)", page))
    assert linked == alerts, f"missing: {alerts - linked}; not an alert: {linked - alerts}"
