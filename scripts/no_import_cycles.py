"""Fails on an import circle between modules, a package's own __init__ included; `make layers` runs it.

import-linter's acyclic_siblings contract (pyproject.toml) checks each
package's children. A circle through a package's __init__ (a module imports
its package, whose __init__ imports that module) runs between a parent and
its child, never between siblings, so the contract cannot see it: this does,
over every module of the tree and every import (under TYPE_CHECKING and
inside functions too, as the contract counts them).

    python scripts/no_import_cycles.py [package ...]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence

import grimp

PACKAGES = ("inboxd", "inboxd_client", "inboxd_edge", "bench")


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def circles(graph: grimp.ImportGraph, packages: Sequence[str]) -> list[list[str]]:
    """Each group of modules that import one another round a circle (strongly connected), sorted."""
    modules = sorted(m for m in graph.modules if _within(m, packages))
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if _within(i, packages)) for m in modules}
    # Tarjan's algorithm, without recursion: a deep chain of imports must not reach Python's recursion limit.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            module, next_edge = work.pop()
            if next_edge == 0:
                index[module] = low[module] = len(index)
                stack.append(module)
                on_stack.add(module)
            targets = edges[module]
            if next_edge < len(targets):
                work.append((module, next_edge + 1))
                target = targets[next_edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
    return sorted(found)


def describe(graph: grimp.ImportGraph, circle: Sequence[str]) -> list[str]:
    """The imports inside one circle, each with where it stands."""
    members = set(circle)
    lines = []
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"  {importer}:{detail['line_number']} imports {imported}: {detail['line_contents']}")
    return lines


def main(argv: Sequence[str]) -> int:
    packages = tuple(argv) or PACKAGES
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # bench/ is found from the repository's root, as lint-imports finds it
    graph = grimp.build_graph(*packages, cache_dir=None)
    found = circles(graph, packages)
    for circle in found:
        print(f"Import circle among {len(circle)} modules:", *describe(graph, circle), sep="\n")
    if found:
        print(f"{len(found)} import circle(s): move what both sides need to a module below both, or hand it in.")
        return 1
    print(f"No import circle among the modules of {', '.join(packages)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
