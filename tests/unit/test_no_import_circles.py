"""`make layers` fails on an import circle: planted in a package of its own, each check finds it.

The contract in pyproject.toml, with only its ancestors changed, breaks on a
circle through an import under TYPE_CHECKING, and on one through an import
inside a function; scripts/no_import_cycles.py fails on a circle through a
package's own __init__, which the contract cannot see. Without the circle,
both pass.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
import pytest

from scripts import no_import_cycles

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def circle_contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    [contract] = [c for c in contracts if c["type"] == "acyclic_siblings"]
    return contract


def plant(tmp_path: Path, files: dict[str, str]) -> None:
    package = tmp_path / "planted"
    (package / "forms").mkdir(parents=True)
    for name in ("__init__.py", "forms/__init__.py"):
        (package / name).write_text("")
    for name, text in files.items():
        (package / name).write_text(text)
    contract = circle_contract()
    lines = ["[importlinter]", "root_package = planted", "", "[importlinter:contract:circles]"]
    lines += [f"name = {contract['name']}", f"type = {contract['type']}", "ancestors = planted"]
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")


def lint(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )


APP = "from planted.forms.edit import Edit\n\nclass App:\n    edit = Edit\n"
EDIT_ALONE = "class Edit:\n    pass\n"


def test_a_circle_through_a_type_checking_import_breaks_the_contract(tmp_path: Path) -> None:
    edit = (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from planted.app import App\n\n"
        "class Edit:\n    app: 'App | None' = None\n"
    )
    plant(tmp_path, {"app.py": APP, "forms/edit.py": edit})
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "No cycles are allowed in planted." in result.stdout
    assert "- .forms -> .app (1 import)" in result.stdout or "- .app -> .forms (1 import)" in result.stdout


def test_a_circle_through_an_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    edit = "class Edit:\n    def app(self) -> object:\n        from planted import app\n\n        return app\n"
    plant(tmp_path, {"app.py": APP, "forms/edit.py": edit})
    result = lint(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "No cycles are allowed in planted." in result.stdout


def test_the_same_package_without_the_circle_keeps_the_contract(tmp_path: Path) -> None:
    plant(tmp_path, {"app.py": APP, "forms/edit.py": EDIT_ALONE})
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout


# What the contract cannot see: a circle through a package's own __init__ (scripts/no_import_cycles.py sees it).
INIT_CIRCLE = {
    "__init__.py": "from planted.worker import Worker\n\nVERSION = '1'\n",
    "worker.py": "from planted import tracing\n\nclass Worker:\n    tracer = tracing\n",
    "tracing.py": "def version() -> str:\n    from planted import VERSION\n\n    return VERSION\n",
}


def plant_init_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, circle: bool) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    files = dict(INIT_CIRCLE)
    if not circle:
        files["tracing.py"] = "def version() -> str:\n    return '1'\n"
    for name, text in files.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_circle_through_a_packages_init_fails_the_module_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_init_circle(tmp_path, monkeypatch, circle=True)
    graph = grimp.build_graph("planted", cache_dir=None)
    assert no_import_cycles.circles(graph, ["planted"]) == [["planted", "planted.tracing", "planted.worker"]]
    assert no_import_cycles.main(["planted"]) == 1
    assert "planted.tracing:2 imports planted: from planted import VERSION" in capsys.readouterr().out
    # ...which the siblings' contract keeps: why `make layers` runs both.
    lines = ["[importlinter]", "root_package = planted", "", "[importlinter:contract:circles]"]
    lines += ["name = circles", "type = acyclic_siblings", "ancestors = planted"]
    (tmp_path / ".importlinter").write_text("\n".join(lines) + "\n")
    assert lint(tmp_path).returncode == 0


def test_the_module_check_passes_the_package_without_the_circle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant_init_circle(tmp_path, monkeypatch, circle=False)
    assert no_import_cycles.main(["planted"]) == 0
