"""`make release`: everything a deployment installs from, into dist/, with no step that needs this checkout later.

dist/
  inboxd-V-py3-none-any.whl, inboxd-V.tar.gz              the server (pyproject.toml at the root)
  inboxd_client-V-py3-none-any.whl, inboxd_client-V.tar.gz the Python client and worker runtime
  inboxd_edge-V-py3-none-any.whl, inboxd_edge-V.tar.gz     the HTTP edge
  inboxd-node-V.tgz                                        `npm pack` of the Node client
  inboxd-deploy-V.tar.gz                                   Containerfile, compose stack, Kubernetes, systemd
  deps/                                                    the third-party wheels, for `pip install --no-index`
  SHA256SUMS                                               of every file above, deps/ included

The three packages are built as test_packages.py builds them: `python -m build --no-isolation` from a copy
(a stale build/ beside the sources would slip deleted modules into a wheel). deps/ holds the wheels of what the
packages require, at the versions this project's .venv was tested with (its `pip freeze` is the constraint),
for this machine's Python and platform, and pip's own wheel (the image installs with it, then leaves it out).
Run with the project's .venv Python: `make release`; `--dist DIR` writes elsewhere (tests, make image).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"inboxd": ROOT, "inboxd-client": ROOT / "clients/python", "inboxd-edge": ROOT / "clients/edge"}
# The files of the deploy tarball: what a stranger needs beside the packages.
DEPLOY_FILES = ("Containerfile", "deploy")
_SKIP = {"build", "dist", "node_modules", "__pycache__", ".venv", ".git", ".inboxd"}


def _not_the_package(folder: str, names: list[str]) -> set[str]:
    skip = set(_SKIP)
    if Path(folder) == ROOT:
        skip |= set(names) - {"pyproject.toml", "README.md", "LICENSE", "NOTICE", "server"}
    return {name for name in names if name in skip or name.endswith(".egg-info")}


def run(*args: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"release: {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def version() -> str:
    text = (ROOT / "server/inboxd/__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    assert match, "server/inboxd/__init__.py has no __version__"
    return match.group(1)


def build_python_packages(work: Path, dist: Path) -> list[Path]:
    for name, folder in PACKAGES.items():
        source = work / name
        shutil.copytree(folder, source, ignore=_not_the_package)
        run(sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "--outdir", str(dist), str(source))
    return sorted(dist.glob("*.whl"))


def third_party_requirements(wheels: list[Path]) -> list[str]:
    """What the wheels require, their own names and extras-only requirements left out."""
    ours = {name.replace("-", "_") for name in PACKAGES}
    wanted: list[str] = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
            lines = archive.read(metadata).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist: "):
                continue
            requirement = line.removeprefix("Requires-Dist: ")
            if "extra ==" in requirement:
                continue
            name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
            if name.replace("-", "_").lower() not in ours and requirement not in wanted:
                wanted.append(requirement)
    return wanted


def download_dependencies(wheels: list[Path], work: Path, dist: Path) -> None:
    deps = dist / "deps"
    deps.mkdir()
    requirements = work / "requirements.txt"
    requirements.write_text("\n".join([*third_party_requirements(wheels), "pip"]) + "\n")
    # The versions the tests ran with; the project's own packages (editable) are not constraints.
    constraints = work / "constraints.txt"
    frozen = run(sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable")
    constraints.write_text("\n".join(line for line in frozen.splitlines() if "==" in line) + "\n")
    run(
        sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(deps),
        "-r", str(requirements), "-c", str(constraints),
    )  # fmt: skip


def pack_node_client(work: Path, dist: Path) -> None:
    # Packed from a copy laid out as the repository is: its prepack copies ../../protos in.
    node = work / "repo/clients/node"
    shutil.copytree(ROOT / "clients/node", node, ignore=shutil.ignore_patterns("node_modules", "*.tgz"))
    shutil.copytree(ROOT / "protos", work / "repo/protos")
    run("npm", "pack", "--silent", "--pack-destination", str(dist), cwd=node)


def pack_deploy_files(release: str, dist: Path) -> None:
    with tarfile.open(dist / f"inboxd-deploy-{release}.tar.gz", "w:gz") as tarball:
        for name in DEPLOY_FILES:
            tarball.add(ROOT / name, arcname=f"inboxd-deploy-{release}/{name}")


def write_checksums(dist: Path) -> None:
    files = sorted(p for p in dist.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(dist)}" for p in files]
    (dist / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="versioned packages, deps/ and SHA256SUMS into one folder")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="the folder, emptied first (default dist/)")
    parser.add_argument("--no-deps", action="store_true", help="leave deps/ out (no index reached)")
    args = parser.parse_args()
    dist: Path = args.dist.resolve()
    release = version()
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wheels = build_python_packages(work, dist)
        if not args.no_deps:
            download_dependencies(wheels, work, dist)
        pack_node_client(work, dist)
    pack_deploy_files(release, dist)
    write_checksums(dist)
    print(f"release {release} in {dist}:")
    for path in sorted(dist.iterdir()):
        print(f"  {path.name}" + (f"/ ({len(list(path.iterdir()))} wheels)" if path.is_dir() else ""))


if __name__ == "__main__":
    main()
