"""An embedded PostgreSQL, run from the machine's own server binaries.

`inboxd serve` without DATABASE_URL uses it with a data directory that
survives restarts; the test harness uses it with a throwaway one. initdb and
pg_ctl refuse to run as root, so as root the cluster belongs to the
`postgres` user and every command runs as that user.

Only who holds the cluster's secret gets in: password authentication
(scram-sha-256). The secret is generated at initdb and kept in the data folder
as a libpq password file, mode 0600 (`inboxd.pgpass`); the URL names that
file, never the secret. A cluster made by an older inboxd (initdb
--auth=trust) is switched over at its next start.

`inboxd serve`'s cluster (`socket_only`) listens on no TCP port at all: its
only socket is inside the 0700 data folder, so no other local account can even
begin a connection (on 127.0.0.1, anyone could hold hundreds of them in the
password exchange and lock inboxd out). inboxd's own sessions there run as
`app_role`, a plain login that owns the database, not as the superuser. The
test harness's throwaway clusters keep 127.0.0.1 and the superuser.
"""

from __future__ import annotations

import logging
import os
import pwd
import re
import secrets
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from inboxd.serving.pg_account import give_to_postgres, postgres_owner, private_parent, runs_as_postgres_user
from inboxd.serving.pg_binaries import EmbeddedPostgresError, find_binaries
from inboxd.serving.pgpass import (
    UnsafeFileError,
    read_entries,
    trusts_local_users,
    write_entries,
    write_password_only_hba,
    write_private,
)
from inboxd.store.bootstrap import create_database_if_absent, ensure_owner_role, set_superuser_password

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError", "find_binaries", "free_port", "private_parent"]

log = logging.getLogger(__name__)

PASSFILE_NAME = "inboxd.pgpass"
# A Unix socket's path must fit in sockaddr_un.sun_path (108 bytes with its NUL on Linux).
_MAX_SOCKET_PATH = 107


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EmbeddedPostgres:
    """One PostgreSQL cluster in `data_dir`, listening on loopback only.

    `durable=False` turns off fsync for throwaway test clusters; never for
    data anyone keeps, benchmarks or reliability tests.
    """

    data_dir: Path
    durable: bool = True
    database: str = "inboxd"
    port: int = 0
    # No TCP: the only socket is in the data folder. For `inboxd serve`.
    socket_only: bool = False
    # The login the conninfo names: a role that owns the database, not the superuser. None: the superuser.
    app_role: str | None = None
    bin_dir: Path = field(default_factory=find_binaries)
    _started_here: bool = False

    @property
    def conninfo(self) -> str:
        return self.url(self.database, self.app_role or "postgres")

    @property
    def passfile(self) -> Path:
        """The libpq password file holding the cluster's secret (mode 0600)."""
        return self.data_dir / PASSFILE_NAME

    @property
    def host(self) -> str:
        """Where the cluster listens: 127.0.0.1, or the folder of its Unix socket."""
        return str(self.data_dir) if self.socket_only else "127.0.0.1"

    def psql_command(self) -> str:
        """A psql command line that opens the database as the conninfo's role, for the start-up log."""
        user = self.app_role or "postgres"
        return f'psql "host={self.host} port={self.port} user={user} dbname={self.database} passfile={self.passfile}"'

    def url(self, database: str, user: str = "postgres") -> str:
        """A URL for `database` on this cluster; it names the password file, not the secret."""
        passfile = quote(str(self.passfile), safe="/")
        if self.socket_only:
            where = f"host={quote(self.host, safe='/')}&port={self.port}"
            return f"postgresql://{user}@/{database}?{where}&passfile={passfile}"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}?passfile={passfile}"

    def start(self) -> str:
        """Creates the cluster if needed, starts it, creates the database; returns the URL."""
        try:
            return self._start()
        except UnsafeFileError as exc:
            raise EmbeddedPostgresError(str(exc)) from None

    def _start(self) -> str:
        self.data_dir = self.data_dir.resolve()
        self._ensure_runnable_dir()
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        running = self._running_port()
        if running is not None and self.socket_only and self._listens_on_tcp():
            # Left running by an older inboxd, on 127.0.0.1: start it again on its socket alone.
            self.port = running
            self.stop()
            running = None
        if running is not None:
            # A server left running on this directory (say, after a SIGKILL): reuse it.
            log.info("embedded PostgreSQL already running on port %d; reusing it", running)
            self.port = running
        else:
            self._start_server()
        if trusts_local_users(self.data_dir):
            self._require_password()
        if self.app_role is None:
            self._create_database()
        else:
            self._hand_database_to_app_role(self.app_role)
        return self.conninfo

    def stop(self) -> None:
        """Stops the server cleanly (fast mode: sessions are ended, nothing is lost)."""
        if self._running_port() is None:
            return
        self._run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"])

    def kill(self) -> None:
        """Stops the server abruptly (immediate mode), as a crash would; for tests."""
        self._run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"])

    def restart_stopped(self) -> None:
        """Starts a stopped server again on the same port."""
        self._start_server(keep_port=True)

    # -- internals --

    def _as_postgres(self) -> bool:
        return runs_as_postgres_user()

    def _ensure_runnable_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self._as_postgres():
            return
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise EmbeddedPostgresError(
                "running as root, but there is no 'postgres' user to run PostgreSQL as "
                "(initdb refuses root). Create one (useradd --system postgres) or run inboxd "
                "as an ordinary user."
            ) from None
        os.chown(self.data_dir, owner.pw_uid, owner.pw_gid)
        os.chmod(self.data_dir, 0o700)
        private = private_parent(self.data_dir)
        if private is not None:
            raise EmbeddedPostgresError(
                f"the 'postgres' user cannot reach {self.data_dir}: {private} is not "
                "searchable by others. Choose a data directory elsewhere (--data-dir or "
                "INBOXD_DATA_DIR), for example under /var/lib/inboxd."
            )

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = "postgres" if self._as_postgres() else None
        proc = subprocess.run(argv, user=user, capture_output=True, text=True, cwd="/", check=False)
        if check and proc.returncode != 0:
            raise EmbeddedPostgresError(
                f"{Path(argv[0]).name} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()}"
            )
        return proc

    def _initdb(self) -> None:
        log.info("creating embedded PostgreSQL cluster in %s", self.data_dir)
        secret = secrets.token_urlsafe(32)
        # initdb wants an empty data folder, so its copy of the secret waits in a private one.
        with tempfile.TemporaryDirectory(prefix="inboxd-initdb-") as folder:
            pwfile = Path(folder) / "pw"
            write_private(pwfile, secret + "\n", postgres_owner())
            give_to_postgres(Path(folder))
            self._run(
                [
                    str(self.bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "-E",
                    "UTF8",
                    "--locale=C.UTF-8",
                ]
            )
        self._write_passfile(secret)

    def _write_passfile(self, secret: str, user: str = "postgres") -> None:
        """Sets `user`'s line of the password file, keeping the others."""
        write_entries(self.passfile, {**read_entries(self.passfile), user: secret}, postgres_owner())

    def _hand_database_to_app_role(self, role: str) -> None:
        """The app role exists, logs in with its own secret, and owns the database and its objects."""
        minted = None
        if role not in read_entries(self.passfile):
            minted = secrets.token_urlsafe(32)
        ensure_owner_role(self.url("postgres"), self.url(self.database), role, minted)
        if minted is not None:
            self._write_passfile(minted, user=role)

    def _listens_on_tcp(self) -> bool:
        """True when the running server's postmaster.pid names a listen address (line 6)."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return False
        return len(lines) > 5 and bool(lines[5].strip())

    def _require_password(self) -> None:
        """Switches a trusting cluster to password authentication: secret, then pg_hba.conf, then restart.

        Each step is safe to repeat, so a start interrupted half-way finishes the job next time.
        """
        log.warning(
            "embedded PostgreSQL in %s let every local user in without a password (made by an older inboxd);"
            " switching it to password authentication, the secret kept in %s",
            self.data_dir,
            self.passfile,
        )
        secret = secrets.token_urlsafe(32)
        set_superuser_password(self.url("postgres"), secret)
        self._write_passfile(secret)
        write_password_only_hba(self.data_dir, postgres_owner())
        # A restart, not a reload: a reload is applied some time after pg_ctl returns.
        self.stop()
        self._start_server(keep_port=True)

    def _running_port(self) -> int | None:
        status = self._run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "status"], check=False)
        if status.returncode != 0:
            return None
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def _start_server(self, *, keep_port: bool = False) -> None:
        settings = [
            *self._listen_settings(),
            "-c",
            "max_connections=400",
            "-c",
            "shared_buffers=256MB",
        ]
        if not self.durable:
            settings += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        if self.socket_only and not self.port:
            # Its socket is in its own folder, where no other server can hold the port: keep the last start's,
            # so the psql command logged at start stays the same from one start to the next.
            self.port = self._last_port() or 0
        keep_port = keep_port or (self.socket_only and bool(self.port))
        last_error: EmbeddedPostgresError | None = None
        for _ in range(1 if keep_port else 5):
            if not keep_port or not self.port:
                self.port = free_port()
            options = " ".join([*settings, "-p", str(self.port)])
            try:
                self._run(
                    [
                        str(self.bin_dir / "pg_ctl"),
                        "-D",
                        str(self.data_dir),
                        "-w",
                        "-t",
                        "60",
                        "-l",
                        str(self.data_dir / "server.log"),
                        "-o",
                        options,
                        "start",
                    ]
                )
                return
            except EmbeddedPostgresError as exc:  # most often: the port was taken meanwhile
                last_error = exc
        assert last_error is not None
        raise last_error

    def _last_port(self) -> int | None:
        """The port of the cluster's last start, from the command line PostgreSQL keeps in postmaster.opts."""
        try:
            match = re.search(r'"-p" "(\d+)"', (self.data_dir / "postmaster.opts").read_text())
        except OSError:
            return None
        return int(match.group(1)) if match else None

    def _listen_settings(self) -> list[str]:
        if not self.socket_only:
            return ["-h", "127.0.0.1", "-c", "unix_socket_directories="]
        if "'" in str(self.data_dir) or len(f"{self.data_dir}/.s.PGSQL.65535") > _MAX_SOCKET_PATH:
            raise EmbeddedPostgresError(
                f"the embedded PostgreSQL's socket would live in {self.data_dir}, whose path is too long for a "
                f"Unix socket ({_MAX_SOCKET_PATH} bytes at most) or holds a quote. Choose a shorter data "
                "directory (--data-dir or INBOXD_DATA_DIR), for example under /var/lib/inboxd."
            )
        # pg_ctl hands -o to a shell: the quotes keep the folder one word, and '' is "no TCP address".
        return [
            "-c",
            "listen_addresses=''",
            "-c",
            f"unix_socket_directories='{self.data_dir}'",
            "-c",
            "unix_socket_permissions=0700",
        ]

    def _create_database(self) -> None:
        create_database_if_absent(self.url("postgres"), self.database)
