"""A primary and a streaming standby on this machine, a multi-host URL for both, and a primary that dies.

The standby is a `pg_basebackup -R` copy of the primary, streaming from it.
Synchronous, the primary names it in `synchronous_standby_names` with
`synchronous_commit=on`: a COMMIT is answered only once the standby has the
WAL on disk. Asynchronous, the primary answers at its own flush and ships the
WAL after. Both clusters are durable (fsync on), as every reliability cluster is.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from inboxd.serving.embedded_pg import EmbeddedPostgres, free_port
from inboxd.store.migrate import migrate
from tests.harness import eventually, throwaway_postgres
from tests.reliability.rig import _pg_ctl, discard_cluster, query, start_postgres

STANDBY_NAME = "inboxd_standby"


@dataclass
class ReplicatedPair:
    primary: EmbeddedPostgres
    standby: EmbeddedPostgres
    synchronous: bool

    @property
    def url(self) -> str:
        """Both hosts, the writable one wanted: what inboxd is given as DATABASE_URL."""
        params = conninfo_to_dict(self.primary.conninfo)
        params.update(
            host="127.0.0.1,127.0.0.1",
            port=f"{self.primary.port},{self.standby.port}",
            target_session_attrs="read-write",
            connect_timeout="5",
        )
        return make_conninfo("", **params)


def _as_postgres(argv: list[str]) -> list[str]:
    """Through runuser rather than subprocess's `user=`: see rig._pg_ctl (no fork() under live gRPC)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _base_backup(primary: EmbeddedPostgres) -> EmbeddedPostgres:
    """A standby: the primary's files copied by pg_basebackup -R, started on a port of its own."""
    folder = Path(tempfile.mkdtemp(prefix="inboxd-test-standby-"))
    os.chmod(folder, 0o755)
    data = folder / "data"
    data.mkdir(mode=0o700)
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(data, owner.pw_uid, owner.pw_gid)
    source = make_conninfo(primary.conninfo, application_name=STANDBY_NAME)
    argv = [str(primary.bin_dir / "pg_basebackup"), "-D", str(data), "-d", source, "-X", "stream", "-R", "-c", "fast"]
    done = subprocess.run(_as_postgres(argv), capture_output=True, text=True, cwd="/", check=False)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise AssertionError(f"pg_basebackup failed ({done.returncode}): {done.stderr or done.stdout}")
    standby = EmbeddedPostgres(data_dir=data, durable=True, port=free_port())
    start_postgres(standby)
    return standby


async def _streaming(primary: EmbeddedPostgres, synchronous: bool) -> bool:
    rows = await query(
        primary.conninfo,
        "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %s",
        (STANDBY_NAME,),
    )
    wanted = "sync" if synchronous else "async"
    return any(state == "streaming" and sync_state == wanted for state, sync_state in rows)


@contextlib.asynccontextmanager
async def replicated_pair(*, synchronous: bool) -> AsyncIterator[ReplicatedPair]:
    """A migrated primary and its streaming standby; both stopped and removed on exit."""
    primary = await asyncio.to_thread(throwaway_postgres, durable=True)
    standby: EmbeddedPostgres | None = None
    try:
        await migrate(primary.conninfo)
        standby = await asyncio.to_thread(_base_backup, primary)
        names = f'"{STANDBY_NAME}"' if synchronous else ""
        await query(primary.conninfo, f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        await query(primary.conninfo, "ALTER SYSTEM SET synchronous_commit = 'on'")
        await query(primary.conninfo, "SELECT pg_reload_conf()")
        await eventually(
            lambda: _streaming(primary, synchronous),
            f"the standby streams from the primary ({'sync' if synchronous else 'async'})",
            within=30.0,
            every=0.1,
        )
        yield ReplicatedPair(primary, standby, synchronous)
    finally:
        if standby is not None:
            await asyncio.to_thread(discard_cluster, standby)
        await asyncio.to_thread(discard_cluster, primary)


# -- the standby cut off, the primary's death, and the standby's promotion --


async def wal_sender(primary: EmbeddedPostgres) -> int:
    """The pid of the primary's process that streams WAL to the standby."""
    rows = await query(
        primary.conninfo, "SELECT pid FROM pg_stat_replication WHERE application_name = %s", (STANDBY_NAME,)
    )
    assert len(rows) == 1, f"one WAL sender streams to the standby, not {len(rows)}"
    return int(rows[0][0])


def cut_off_standby(wal_sender_pid: int) -> None:
    """SIGSTOPs the primary's WAL sender: the standby falls behind, as over a slow or broken link.

    A synchronous primary then holds every COMMIT (wait event SyncRep); an
    asynchronous one goes on answering, its WAL shipped to nobody.
    """
    os.kill(wal_sender_pid, signal.SIGSTOP)


async def held_commits(primary: EmbeddedPostgres) -> int:
    """COMMITs flushed on the primary and waiting for the standby to confirm them."""
    rows = await query(primary.conninfo, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    return int(rows[0][0])


async def held_commit_xids(primary: EmbeddedPostgres) -> set[str]:
    """The transactions whose COMMIT is flushed on the primary and waits for the standby, by xid.

    A retry that waits again is another transaction: its xid tells it from
    the first attempt, which may run on the same connection.
    """
    rows = await query(primary.conninfo, "SELECT backend_xid::text FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    return {str(xid) for (xid,) in rows}


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                # The command name, in parentheses, may hold spaces: the fields after it are fixed.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # dead, waiting for init to reap it


def freeze_primary(pg: EmbeddedPostgres) -> list[int]:
    """SIGSTOPs the postmaster, then every process it started: from now on it answers nothing.

    The postmaster goes first, so it cannot start another backend meanwhile.
    Answers the pids, for `kill_frozen`. Synchronous, and quick: the caller's
    event loop runs nothing else in between, so "before" and "after" are exact.
    """
    postmaster = int((pg.data_dir / "postmaster.pid").read_text().splitlines()[0])
    os.kill(postmaster, signal.SIGSTOP)
    pids = [postmaster]
    for child in _children(postmaster):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGSTOP)
            pids.append(child)
    return pids


async def kill_frozen(pg: EmbeddedPostgres, pids: list[int]) -> None:
    """SIGKILLs them all, as a machine that dies takes every process with it; waits until they are gone.

    The dead postmaster's pid file goes too: a later `pg_ctl stop` must not
    signal whatever process is given that pid next.
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    await eventually(lambda: all(_gone(pid) for pid in pids), "the primary's processes are gone", within=15.0)
    (pg.data_dir / "postmaster.pid").unlink(missing_ok=True)


def promote(standby: EmbeddedPostgres) -> None:
    """pg_ctl promote, waiting until the standby takes writes."""
    _pg_ctl(standby, "-w", "-t", "60", "promote")
