"""Which PostgreSQL inboxd serves from: DATABASE_URL's, or an embedded one, only when that is plainly wanted.

A lost DATABASE_URL (an env file whose unquoted `&` cut the line, a typo
such as DATABSE_URL) must never turn a production server into one that
acknowledges webhooks into a fresh local database nobody backs up. So the
embedded database starts only when nothing is production-shaped (no tokens
file, no TLS, loopback only, as `make run`), or when INBOXD_EMBEDDED=1 asks
for it; and every start logs which database it uses.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections.abc import Mapping
from pathlib import Path

from inboxd.config.settings import ConfigError, Settings
from inboxd.serving.embedded_pg import EmbeddedPostgres
from inboxd.serving.pg_account import private_parent, runs_as_postgres_user
from inboxd.store.conninfo import describe_database

log = logging.getLogger(__name__)


def production_shape(settings: Settings) -> list[str]:
    """What in `settings` says a deployment meant to keep its data: a tokens file, TLS, a listen beyond loopback."""
    shaped = []
    if settings.tokens_file is not None:
        shaped.append(f"a tokens file (INBOXD_TOKENS_FILE={settings.tokens_file})")
    if settings.tls_cert is not None:
        shaped.append("TLS (INBOXD_TLS_CERT)")
    if settings.listens_beyond_loopback():
        shaped.append(f"a listen address beyond loopback (INBOXD_LISTEN={settings.listen})")
    return shaped


def near_misses(env: Mapping[str, str]) -> list[str]:
    """Variables whose names look like DATABASE_URL misspelt (DATABSE_URL, DATABASE_URI, database_url)."""
    names = [name for name in env if name != "DATABASE_URL"]
    close = difflib.get_close_matches("DATABASE_URL", [n.upper() for n in names], n=3, cutoff=0.8)
    return [name for name in names if name.upper() in close]


def embedded_refusal(settings: Settings, env: Mapping[str, str]) -> str | None:
    """Why the embedded database must not start for these settings, or None."""
    if settings.database_url or settings.embedded:
        return None
    shaped = production_shape(settings)
    if not shaped:
        return None
    misses = near_misses(env)
    typo = f" ({', '.join(misses)} is set: a misspelt DATABASE_URL?)" if misses else ""
    return (
        f"DATABASE_URL is not set{typo}, and this server is configured for production: {'; '.join(shaped)}. "
        "inboxd will not acknowledge webhooks into a fresh local database nobody backs up. Set DATABASE_URL "
        "(check that the env file quotes a URL with '&'), or set INBOXD_EMBEDDED=1 to run on the embedded "
        "PostgreSQL on purpose."
    )


class ChosenDatabase:
    """The configured database, or an embedded one started (and later stopped) here."""

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.env = env
        self.embedded: EmbeddedPostgres | None = None

    def start(self) -> str:
        """Its URL, once it is up; raises ConfigError when only a missing DATABASE_URL would make it embedded."""
        if self.settings.database_url:
            try:
                described = describe_database(self.settings.database_url)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            log.info("database: %s (DATABASE_URL)", described)
            return self.settings.database_url
        refusal = embedded_refusal(self.settings, self.env)
        if refusal is not None:
            raise ConfigError(refusal)
        for name in near_misses(self.env):
            log.warning("%s is set but DATABASE_URL is not: is it misspelt? Using the embedded database", name)
        # No TCP port, and inboxd's sessions as the database's owner rather than the superuser.
        self.embedded = EmbeddedPostgres(data_dir=embedded_dir(self.settings), socket_only=True, app_role="inboxd")
        url = self.embedded.start()
        log.info(
            "database: embedded PostgreSQL in %s, on its Unix socket there alone (no TCP port), dbname=%s user=%s",
            self.embedded.data_dir,
            self.embedded.database,
            self.embedded.app_role,
        )
        log.info("to look inside: %s", self.embedded.psql_command())
        return url

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
            log.info("embedded PostgreSQL in %s stopped", self.embedded.data_dir)


def embedded_dir(settings: Settings) -> Path:
    """The embedded cluster's folder: under the data dir, unless root runs inboxd from a private folder.

    As root, PostgreSQL runs as the `postgres` user, who cannot enter a folder
    such as /root. With the default data dir, inboxd then keeps the cluster
    under /var/lib/inboxd (one folder per project path) rather than fail;
    a data dir given explicitly is used as given, or refused with the reason.
    """
    wanted = (settings.data_dir / "postgres").resolve()
    if not runs_as_postgres_user() or settings.data_dir != Settings().data_dir or private_parent(wanted) is None:
        return wanted
    digest = hashlib.sha256(str(wanted).encode()).hexdigest()[:10]
    fallback = Path("/var/lib/inboxd") / f"{wanted.parent.parent.name}-{digest}" / "postgres"
    log.warning(
        "the postgres user cannot reach %s (%s is private); keeping the embedded database in %s",
        wanted,
        private_parent(wanted),
        fallback,
    )
    return fallback
