"""docs/upgrades.md says of every migration whether it may run beside the version before: a new one needs a row."""

from __future__ import annotations

import re

from inboxd.store.migrate import available_migrations
from tests.harness import REPO

UPGRADES = REPO / "docs" / "upgrades.md"


def covered_versions(text: str) -> set[int]:
    """The versions the side-by-side table's rows name: `up to 0018` covers 1..18, `0019, 0020` those two."""
    covered: set[int] = set()
    for row in re.findall(r"^\| ([^|]+) \|", text, re.MULTILINE):
        up_to = re.match(r"up to (\d{4})", row)
        if up_to:
            covered.update(range(1, int(up_to.group(1)) + 1))
        else:
            covered.update(int(number) for number in re.findall(r"\b(\d{4})\b", row))
    return covered


def test_every_migration_has_a_row_in_the_upgrades_table() -> None:
    missing = [
        name for version, name, _ in available_migrations() if version not in covered_versions(UPGRADES.read_text())
    ]
    assert not missing, f"docs/upgrades.md's side-by-side table has no row for {missing}: say whether it is additive"


def test_the_gaps_in_the_numbers_are_explained() -> None:
    versions = [version for version, _, _ in available_migrations()]
    gaps = sorted(set(range(1, max(versions) + 1)) - set(versions))
    text = UPGRADES.read_text()
    for gap in gaps:
        assert f"{gap:04d}" in text.split("**Gaps in the numbers.**", 1)[1].split("\n\n", 1)[0], gap
