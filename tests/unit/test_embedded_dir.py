"""Where `inboxd serve` keeps its embedded PostgreSQL, with no database."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.database_choice import embedded_dir as _embedded_dir
from inboxd.serving.pg_account import private_parent


def test_a_private_parent_folder_is_found() -> None:
    # Not pytest's tmp_path: its parents are private themselves.
    open_dir = Path(tempfile.mkdtemp(prefix="inboxd-test-"))
    try:
        os.chmod(open_dir, 0o755)
        private = open_dir / "home"
        private.mkdir()
        os.chmod(private, 0o700)
        assert private_parent(private / "project" / ".inboxd" / "postgres") == private
        assert private_parent(open_dir / "open" / "postgres") is None
    finally:
        shutil.rmtree(open_dir)


def test_the_default_data_dir_moves_out_of_a_private_folder_only_for_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    os.chmod(tmp_path / "home", 0o700)
    monkeypatch.chdir(project)
    chosen = _embedded_dir(Settings())
    if os.geteuid() == 0:
        assert chosen.parts[:4] == ("/", "var", "lib", "inboxd")
        assert chosen.name == "postgres"
        assert chosen == _embedded_dir(Settings()), "the same project must find the same cluster again"
    else:
        assert chosen == project / ".inboxd" / "postgres"


def test_an_explicit_data_dir_is_used_as_given(tmp_path: Path) -> None:
    given = tmp_path / "data"
    assert _embedded_dir(Settings(data_dir=given)) == given.resolve() / "postgres"
