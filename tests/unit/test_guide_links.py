"""The operators' guides link only to files and sections that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDES = ["deployment.md", "backup-and-restore.md", "upgrades.md", "sizing.md", "configuration.md"]


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 _-]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _broken(page: Path) -> list[str]:
    """Each relative link of the page whose file, or whose section in a Markdown file, does not exist."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no such section")
    return broken


@pytest.mark.parametrize("guide", GUIDES)
def test_every_relative_link_resolves(guide: str) -> None:
    broken = _broken(ROOT / "docs" / guide)
    assert not broken, f"{guide}: " + "; ".join(broken)


def test_every_relative_link_of_the_readme_resolves() -> None:
    # The docs site checks its own pages (make docs-check); the README, the front page on GitHub, is not one.
    broken = _broken(ROOT / "README.md")
    assert not broken, "README.md: " + "; ".join(broken)
