"""inboxd is Apache-2.0: the licence's text at the root and in every package, its SPDX identifier in every metadata."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEBIAN_TEXT = Path("/usr/share/common-licenses/Apache-2.0")
# Each package's own folder: an sdist or npm tarball carries only what lies under it, so each holds a copy.
PACKAGE_DIRS = [ROOT, ROOT / "clients/python", ROOT / "clients/edge", ROOT / "clients/node"]
PYPROJECTS = [ROOT / "pyproject.toml", ROOT / "clients/python/pyproject.toml", ROOT / "clients/edge/pyproject.toml"]


def test_the_licence_is_apaches_text_verbatim() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    if DEBIAN_TEXT.exists():
        assert text == DEBIAN_TEXT.read_text()


@pytest.mark.parametrize("folder", PACKAGE_DIRS[1:], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_package_carries_the_same_licence_and_notice(folder: Path) -> None:
    for name in ("LICENSE", "NOTICE"):
        assert (folder / name).read_text() == (ROOT / name).read_text(), f"{folder / name} differs from the root's"


@pytest.mark.parametrize("pyproject", PYPROJECTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_package_says_apache_2_0(pyproject: Path) -> None:
    project = tomllib.loads(pyproject.read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE", "NOTICE"]


def test_the_node_package_says_apache_2_0() -> None:
    package = json.loads((ROOT / "clients/node/package.json").read_text())
    assert package["license"] == "Apache-2.0"
    assert {"LICENSE", "NOTICE"} <= set(package["files"])
    lock = json.loads((ROOT / "clients/node/package-lock.json").read_text())
    assert lock["packages"][""]["license"] == "Apache-2.0"
