"""No internal words where a user reads: no issue numbers, no "this round", no "rooms", no file the repository lacks.

A reader of the README, the changelog, the docs site or a client's README has no issue tracker, no planning
rounds and no design notes of ours: each such word is a door to a room they cannot enter.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every page a user reads: the front page, the changelog, the docs site's sources, the clients' and the models' READMEs.
PAGES = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "model" / "README.md",
        *(ROOT / "docs").rglob("*.md"),
        *(ROOT / "clients").glob("*/README.md"),
    ]
)

# Each word a reader cannot follow, with why it is refused.
INTERNAL = [
    (re.compile(r"\bissues? #?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\b(this|next|last|previous|earlier) round\b", re.IGNORECASE), "a planning round"),
    (re.compile(r"\brooms\b|\b(one|a|every) room (per|below|in)\b", re.IGNORECASE), "'room' for a package"),
]

# A file named in prose or in a link, e.g. `DESIGN.md` or [the design](../DESIGN.md).
NAMED_FILE = re.compile(r"(?<![\w/.-])((?:\.\./|\./)?(?:[\w.-]+/)*[A-Z][A-Z_-]+\.md)\b")


def _relative(page: Path) -> str:
    return str(page.relative_to(ROOT))


def internal_words(text: str) -> list[str]:
    """Each line that holds an internal word, numbered from 1, with the word and why."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for pattern, why in INTERNAL:
            for match in pattern.finditer(line):
                found.append(f"line {number}: {match.group(0)!r} ({why})")
    return found


def missing_files(page: Path, text: str) -> list[str]:
    """Each upper-case-named Markdown file (DESIGN.md, NOTES.md ...) the page names that is not in the repository."""
    missing = []
    for number, line in enumerate(text.splitlines(), start=1):
        for name in NAMED_FILE.findall(line):
            candidates = [(page.parent / name), ROOT / name, ROOT / Path(name).name]
            if not any(c.resolve().is_file() for c in candidates):
                missing.append(f"line {number}: {name} is not in the repository")
    return missing


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_a_page_users_read_holds_no_internal_word(page: Path) -> None:
    found = internal_words(page.read_text())
    assert not found, f"{_relative(page)}: " + "; ".join(found)


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_a_page_users_read_holds_no_merge_conflict_markers(page: Path) -> None:
    # clients/edge/README.md once held a whole conflict, rendered on the site as a heading of 1,000 characters.
    found = [
        f"line {n}: {line[:20]!r}"
        for n, line in enumerate(page.read_text().splitlines(), start=1)
        if re.match(r"(<{7}|={7}|>{7})( |$)", line)
    ]
    assert not found, f"{_relative(page)}: " + "; ".join(found)


@pytest.mark.parametrize("page", PAGES, ids=_relative)
def test_a_page_users_read_names_no_file_the_repository_lacks(page: Path) -> None:
    found = missing_files(page, page.read_text())
    assert not found, f"{_relative(page)}: " + "; ".join(found)


def test_the_check_catches_each_word_the_docs_once_held() -> None:
    # The words this test was written against, as they stood on the pages: each must be caught.
    for line in [
        "### Tracing (issue 31)",
        "Issues 13 and 14, then issue 10's kept targets",
        "No version has been released yet. This round, started with this file:",
        "server/inboxd/      the service, one room per capability",
        "rooms on one level not each other",
    ]:
        assert internal_words(line), line
    assert missing_files(ROOT / "docs" / "operations.md", "(DESIGN.md's action rules do not name the operator)")


def test_the_check_leaves_plain_english_alone() -> None:
    for line in [
        "one network round trip per commit",
        "round robin in byte order of namespace",
        "until answers free room",
        "Each round enqueues 20,000 no-op jobs",
        "See CHANGELOG.md and README.md",
    ]:
        assert not internal_words(line), line
    assert not missing_files(ROOT / "README.md", "See CHANGELOG.md and README.md")
