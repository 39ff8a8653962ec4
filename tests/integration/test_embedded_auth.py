"""The embedded PostgreSQL lets in only who holds its secret, not every local account."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from inboxd.serving.embedded_pg import EmbeddedPostgres, EmbeddedPostgresError
from tests.harness import searchable_folder

PASSFILE = "inboxd.pgpass"


@pytest.fixture
def folder() -> Iterator[Path]:
    with searchable_folder("inboxd-test-auth-") as path:
        yield path


def _without_secret(pg: EmbeddedPostgres) -> str:
    """What any local account could try: the cluster's address with no password."""
    return f"postgresql://postgres@127.0.0.1:{pg.port}/postgres?connect_timeout=10"


def _refused_without_secret(pg: EmbeddedPostgres) -> None:
    assert "PGPASSWORD" not in os.environ
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(_without_secret(pg), passfile=str(pg.data_dir.parent / "no-such-passfile")).close()


def _accepts_its_own_url(pg: EmbeddedPostgres) -> None:
    with psycopg.connect(pg.conninfo) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)


def test_a_new_cluster_refuses_a_connection_without_its_secret(folder: Path) -> None:
    pg = EmbeddedPostgres(data_dir=folder / "data", durable=False)
    pg.start()
    try:
        _refused_without_secret(pg)
        _accepts_its_own_url(pg)
        secret = pg.data_dir / PASSFILE
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert "password" not in pg.conninfo.split("?")[0], "the secret stays out of the URL (and so of logs)"
    finally:
        pg.stop()


def test_a_cluster_made_by_an_older_inboxd_with_trust_is_switched_to_passwords(folder: Path) -> None:
    pg = EmbeddedPostgres(data_dir=folder / "data", durable=False)
    pg.data_dir.mkdir(mode=0o700)
    if os.geteuid() == 0:
        shutil.chown(pg.data_dir, "postgres", "postgres")
    # What inboxd did before: initdb --auth=trust.
    pg._run([str(pg.bin_dir / "initdb"), "-D", str(pg.data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    pg.start()
    try:
        _refused_without_secret(pg)
        _accepts_its_own_url(pg)
    finally:
        pg.stop()
    # And it stays so across a restart.
    again = EmbeddedPostgres(data_dir=folder / "data", durable=False)
    again.start()
    try:
        _refused_without_secret(again)
        _accepts_its_own_url(again)
    finally:
        again.stop()


def test_a_password_file_linked_elsewhere_is_refused_and_its_target_untouched(folder: Path) -> None:
    """`postgres` owns the cluster's folder: a link it plants there must not make root rewrite or chown a file."""
    pg = EmbeddedPostgres(data_dir=folder / "data", durable=False, app_role="inboxd")
    pg.start()
    pg.stop()
    victim = folder / "root-owned"
    victim.write_text("not for postgres\n")
    os.chmod(victim, 0o644)
    before = victim.stat()
    passfile = pg.data_dir / PASSFILE
    passfile.unlink()
    passfile.symlink_to(victim)
    again = EmbeddedPostgres(data_dir=folder / "data", durable=False, app_role="inboxd")
    try:
        with pytest.raises(EmbeddedPostgresError, match="symbolic link"):
            again.start()
    finally:
        again.stop()
    after = victim.stat()
    assert victim.read_text() == "not for postgres\n"
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (before.st_uid, before.st_gid, 0o644)
