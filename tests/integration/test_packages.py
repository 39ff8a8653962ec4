"""The packages as a user gets them: built by `python -m build`, installed in a venv of their own, serving an Accept.

The venv holds only the three wheels; their dependencies (grpcio, psycopg, ...)
are read from this project's .venv through a path file, so the test needs no
index and installs nothing from the network. The wheels' own code and files
(migrations, named queries, the console's static files, entry points) come
from the wheels alone: the editable installs' hooks are not loaded there.
`npm pack` makes the Node package, protos/ bundled.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import inboxd
from inboxd_client import AcceptOutcome
from tests.integration.procs import Serve, embedded_env

ROOT = Path(__file__).resolve().parents[2]
PYTHON_PACKAGES = {"inboxd": ROOT, "inboxd_client": ROOT / "clients/python", "inboxd_edge": ROOT / "clients/edge"}

# Run by the venv's interpreter: one Accept through the installed client, its outcome printed.
ACCEPT = """
import sys
from inboxd_client import InboxClient
target, namespace = sys.argv[1:]
with InboxClient(target, retry=None) as client:
    for _ in range(2):
        print(client.accept(namespace, "evt-1", "package.checked", {"from": "wheel"}).outcome)
"""


@dataclass(frozen=True)
class Installed:
    """A venv holding the three built wheels."""

    bin: Path
    wheels: tuple[Path, ...]

    def run(self, *args: str) -> str:
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False, cwd="/")
        assert done.returncode == 0, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout


def _not_the_package(folder: str, names: list[str]) -> set[str]:
    """What a package's build needs none of: the other packages' folders, caches, earlier builds."""
    skip = {"build", "dist", "node_modules", "__pycache__", ".venv", ".git", ".inboxd"}
    if Path(folder) == ROOT:
        skip |= set(names) - {"pyproject.toml", "README.md", "LICENSE", "NOTICE", "server"}
    return {name for name in names if name in skip or name.endswith(".egg-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    dist = tmp_path_factory.mktemp("dist")
    for name, folder in PYTHON_PACKAGES.items():
        # Built from a copy: setuptools keeps build/ and *.egg-info beside the sources, and a stale build/lib
        # would slip modules deleted since into the wheel.
        source = tmp_path_factory.mktemp(name) / "src"
        shutil.copytree(folder, source, ignore=_not_the_package)
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)],
            capture_output=True,
            check=True,
            timeout=120,
        )
    wheels = tuple(sorted(dist.glob("*.whl")))
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # The dependencies, from this project's venv; a bare path in a .pth file runs none of that venv's own .pth hooks.
    (site / "dependencies-from-the-project.pth").write_text(sysconfig.get_path("purelib") + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-index", *map(str, wheels)], check=True, timeout=120)
    # Every dependency the wheels declare is there: a missing one in a wheel's metadata fails here.
    subprocess.run([*pip, "check"], check=True, capture_output=True, timeout=60)
    yield Installed(venv / "bin", wheels)


def test_build_makes_one_wheel_of_each_package_with_its_licence_and_readme(installed: Installed) -> None:
    names = sorted(wheel.name for wheel in installed.wheels)
    version = inboxd.__version__
    assert names == [f"{name}-{version}-py3-none-any.whl" for name in sorted(PYTHON_PACKAGES)]
    for name in PYTHON_PACKAGES:
        metadata = installed.run(
            str(installed.bin / "python"), "-c",
            f"import importlib.metadata as m; print(m.distribution({name!r}).read_text('METADATA'))",
        )  # fmt: skip
        assert "License-Expression: Apache-2.0" in metadata
        assert "Project-URL: Source, " in metadata
        assert "Classifier: Programming Language :: Python :: 3.11" in metadata
        assert "Description-Content-Type: text/markdown" in metadata
        readme = (PYTHON_PACKAGES[name] / "README.md").read_text().splitlines()[0]
        assert readme in metadata


def test_the_venv_imports_the_wheels_not_the_working_tree(installed: Installed) -> None:
    where = installed.run(
        str(installed.bin / "python"),
        "-c",
        "import inboxd, inboxd_client, inboxd_edge as e; print(inboxd.__file__, e.__file__)",
    )
    for path in where.split():
        assert Path(path).is_relative_to(installed.bin.parent), where


def test_the_installed_commands_say_their_version(installed: Installed) -> None:
    assert installed.run(str(installed.bin / "inboxd"), "--version") == f"inboxd {inboxd.__version__}\n"
    assert installed.run(str(installed.bin / "inboxd-edge"), "--version") == f"inboxd-edge {inboxd.__version__}\n"


def test_the_installed_server_answers_the_installed_clients_accept(
    installed: Installed, migrated_url: str, tmp_path: Path, ns: str
) -> None:
    env = embedded_env(tmp_path / "data", DATABASE_URL=migrated_url)
    server = Serve(env, tmp_path / "serve.log", command=(str(installed.bin / "inboxd"),)).start()
    try:
        out = installed.run(str(installed.bin / "python"), "-c", ACCEPT, server.target, ns)
        assert out.split() == [str(AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED), str(AcceptOutcome.ACCEPT_OUTCOME_DUPLICATE)]
        assert server.terminate() == 0
    finally:
        server.kill()


def test_npm_pack_makes_the_node_package_with_its_protos_and_licence(tmp_path: Path) -> None:
    # Packed from a copy laid out as the repository is (protos/ two folders up): the pack's own copy of
    # protos/ never appears under clients/node, where the Node tests running beside this one load it from.
    node = tmp_path / "repo/clients/node"
    shutil.copytree(ROOT / "clients/node", node, ignore=shutil.ignore_patterns("node_modules", "*.tgz"))
    shutil.copytree(ROOT / "protos", tmp_path / "repo/protos")
    done = subprocess.run(
        ["npm", "pack", "--json", "--pack-destination", str(tmp_path)],
        cwd=node, capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    [packed] = json.loads(done.stdout)
    with tarfile.open(tmp_path / packed["filename"]) as tarball:
        files = set(tarball.getnames())
    assert {"package/LICENSE", "package/NOTICE", "package/package.json", "package/src/index.js"} <= files
    assert {f"package/protos/inboxd/v1/{name}.proto" for name in ("inbox", "admin", "types")} <= files
    assert not (node / "protos").exists(), "postpack leaves no copy of protos/ in the package's folder"
