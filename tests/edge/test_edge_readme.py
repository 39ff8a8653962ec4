"""The edge's README lists every preset as the code defines it, and every route setting the loader takes."""

from __future__ import annotations

from pathlib import Path

from inboxd_edge.config import ROUTE_KEYS
from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.table import table

README = Path(__file__).resolve().parents[2] / "clients" / "edge" / "README.md"


def test_the_readme_holds_the_preset_table_the_presets_make() -> None:
    assert table() in README.read_text(encoding="utf-8"), "run python -m inboxd_edge.presets.table into the README"


def test_the_readme_names_every_route_setting_and_every_hmac_template_setting() -> None:
    text = README.read_text(encoding="utf-8")
    names = set(ROUTE_KEYS) | set(HmacScheme.__dataclass_fields__)
    assert [name for name in sorted(names) if f"`{name}`" not in text] == []
