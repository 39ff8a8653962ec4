"""MkDocs hook: a link from a page to a file outside docs/ becomes a link to that file in the repository.

The pages are written to be read on GitHub too, so they link to the README, to source files and to the
clients' folders by relative path. MkDocs knows only docs/, and would call each such link broken. This hook
checks that the file exists (and, for a Markdown file, that the anchor names one of its headings, as GitHub
slugs them) and points the link at the repository; a link to nothing is a warning, which `--strict` fails.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("mkdocs.hooks.docs_links")

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
FENCE = re.compile(r"^(```|~~~)", re.MULTILINE)


def github_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (code blocks' comment lines are not headings)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, n = slug, 1
        while anchor in anchors:
            anchor, n = f"{slug}-{n}", n + 1
        anchors.add(anchor)
    return anchors


def _outside(target: str, page_src: str, docs_dir: Path, repo_url: str) -> str | None:
    """The repository link for a relative link that leaves docs/, or None to leave the link as it is."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path or target.startswith("/"):
        return None
    resolved = Path(posixpath.normpath(posixpath.join(posixpath.dirname(page_src), parts.path)))
    absolute = (docs_dir / resolved).resolve()
    if absolute.is_relative_to(docs_dir.resolve()):
        return None  # MkDocs checks links inside docs/ itself
    if not absolute.is_relative_to(ROOT) or not absolute.exists():
        log.warning("Doc file '%s' links to '%s', which is not in the repository", page_src, target)
        return target
    if parts.fragment and absolute.suffix == ".md" and parts.fragment not in github_anchors(absolute):
        log.warning("Doc file '%s' links to '%s', whose page has no such heading", page_src, target)
    kind = "tree" if absolute.is_dir() else "blob"
    link = f"{repo_url.rstrip('/')}/{kind}/main/{absolute.relative_to(ROOT).as_posix()}"
    return f"{link}#{parts.fragment}" if parts.fragment else link


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs_dir = Path(config["docs_dir"])
    repo_url = config["repo_url"]
    src = page.file.src_uri
    # Only prose: a fenced block's brackets are code, never links.
    pieces = FENCE.split(markdown)
    out, in_fence, i = [], False, 0
    while i < len(pieces):
        piece = pieces[i]
        if piece in ("```", "~~~") and i > 0:
            in_fence = not in_fence
            out.append(piece)
        elif in_fence:
            out.append(piece)
        else:

            def swap(m: re.Match[str]) -> str:
                new = _outside(m.group(2), src, docs_dir, repo_url)
                return m.group(0) if new is None else f"{m.group(1)}{new}{m.group(3)}"

            out.append(LINK.sub(swap, piece))
        i += 1
    return "".join(out)
