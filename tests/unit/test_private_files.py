"""The embedded cluster's private files are never written or read through a link that `postgres` planted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from inboxd.serving.pgpass import UnsafeFileError, read_entries, write_entries, write_private


def test_write_private_refuses_a_link_and_leaves_its_target_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root's own file\n")
    os.chmod(victim, 0o644)
    planted = tmp_path / "inboxd.pgpass"
    planted.symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        write_entries(planted, {"postgres": "s3cret"})
    assert victim.read_text() == "root's own file\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temporary file is left"


def test_read_entries_refuses_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "shadow"
    victim.write_text("root:$6$hash:19000:0:99999:7:::\n")
    planted = tmp_path / "inboxd.pgpass"
    planted.symlink_to(victim)
    with pytest.raises(UnsafeFileError):
        read_entries(planted)


def test_write_private_replaces_a_regular_file_owner_only_from_the_first_byte(tmp_path: Path) -> None:
    path = tmp_path / "inboxd.pgpass"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    write_private(path, "*:*:*:postgres:new\n", (os.getuid(), os.getgid()))
    assert path.read_text() == "*:*:*:postgres:new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_entries(path) == {"postgres": "new"}


def test_write_private_refuses_a_folder_in_the_files_place(tmp_path: Path) -> None:
    (tmp_path / "pg_hba.conf").mkdir()
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        write_private(tmp_path / "pg_hba.conf", "local all all scram-sha-256\n")
