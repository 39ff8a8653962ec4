"""`make release` as a stranger uses it: dist/ installs into a clean venv with no index, and serves.

The release is made by scripts/release.py into a folder of the test's own (never the checkout's dist/),
then installed exactly as docs/deployment.md says: `pip install --no-index --find-links dist --find-links
dist/deps inboxd inboxd-edge`, by the new venv's own pip, with pip's user and site configuration ignored.
Nothing of this project's .venv is visible to that venv. Building and downloading take about a minute, once.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import inboxd
from inboxd_client import AcceptOutcome
from tests.integration.procs import Serve, embedded_env

ROOT = Path(__file__).resolve().parents[2]
VERSION = inboxd.__version__

# Run by the venv's interpreter: one Accept through the installed client against the installed server.
ACCEPT = """
import sys
from inboxd_client import InboxClient
target, namespace = sys.argv[1:]
with InboxClient(target, retry=None) as client:
    print(client.accept(namespace, "evt-release", "release.checked", {"from": "dist"}).outcome)
"""


@dataclass(frozen=True)
class Release:
    dist: Path
    bin: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False, cwd="/")


def _isolated_pip_env() -> dict[str, str]:
    """pip with no configuration of this machine's (an extra index there would hide a missing wheel)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    dist = tmp_path_factory.mktemp("release") / "dist"
    made = subprocess.run(
        [sys.executable, str(ROOT / "scripts/release.py"), "--dist", str(dist)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    venv = tmp_path_factory.mktemp("clean") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--no-index"]
    installed = subprocess.run(
        [*pip, "--find-links", str(dist), "--find-links", str(dist / "deps"), "inboxd", "inboxd-edge"],
        capture_output=True, text=True, timeout=300, check=False, env=_isolated_pip_env(),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    yield Release(dist, venv / "bin")


def test_release_holds_each_package_versioned_and_checksummed(release: Release) -> None:
    names = {path.name for path in release.dist.iterdir()}
    expected = {
        *(f"{name}-{VERSION}-py3-none-any.whl" for name in ("inboxd", "inboxd_client", "inboxd_edge")),
        *(f"{name}-{VERSION}.tar.gz" for name in ("inboxd", "inboxd_client", "inboxd_edge")),
        f"inboxd-node-{VERSION}.tgz",
        f"inboxd-deploy-{VERSION}.tar.gz",
        "deps",
        "SHA256SUMS",
    }
    assert names == expected
    sums = (release.dist / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in sums}
    files = {str(p.relative_to(release.dist)) for p in release.dist.rglob("*") if p.is_file()} - {"SHA256SUMS"}
    assert set(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((release.dist / name).read_bytes()).hexdigest() == digest, name
    # What a deployment needs besides the packages: no step may need the repository.
    with tarfile.open(release.dist / f"inboxd-deploy-{VERSION}.tar.gz") as tarball:
        members = {name.split("/", 1)[1] for name in tarball.getnames() if "/" in name}
    assert {
        "Containerfile",
        "deploy/image/inboxd-probe",
        "deploy/kubernetes/inboxd.yaml",
        "deploy/compose.yaml",
        "deploy/compose/worker.py",
        "deploy/systemd/inboxd.service",
        "deploy/systemd/inboxd-edge.service",
    } <= members


def test_release_installs_with_no_index_and_only_its_own_files(release: Release) -> None:
    where = release.run(str(release.bin / "python"), "-c", "import inboxd, inboxd_edge; print(inboxd.__file__)")
    assert Path(where.stdout.strip()).is_relative_to(release.bin.parent), where
    # pip itself is the venv's: every installed distribution came from dist/ or dist/deps/.
    shipped = {path.name.split("-")[0].lower() for path in release.dist.rglob("*.whl")}
    listed = release.run(str(release.bin / "python"), "-m", "pip", "list", "--format=freeze")
    for line in listed.stdout.split():
        assert line.split("==")[0].lower().replace("-", "_") in shipped | {"pip", "setuptools"}, line
    helped = release.run(str(release.bin / "inboxd-edge"), "--help")
    assert helped.returncode == 0 and "--config" in helped.stdout, helped.stderr


def test_released_server_serves_an_accept_against_the_database(
    release: Release, migrated_url: str, tmp_path: Path, ns: str
) -> None:
    env = embedded_env(tmp_path / "data", DATABASE_URL=migrated_url)
    server = Serve(env, tmp_path / "serve.log", command=(str(release.bin / "inboxd"),)).start()
    try:
        done = release.run(str(release.bin / "python"), "-c", ACCEPT, server.target, ns)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [str(AcceptOutcome.ACCEPT_OUTCOME_ACCEPTED)], done.stdout
        assert server.terminate() == 0
    finally:
        server.kill()
