"""The embedded database starts only when nothing is production-shaped, or when asked; the log names the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from inboxd.config.settings import Settings
from inboxd.serving.database_choice import embedded_refusal, near_misses, production_shape
from inboxd.store.conninfo import describe_database


def test_make_run_defaults_get_the_embedded_database() -> None:
    assert production_shape(Settings()) == []
    assert embedded_refusal(Settings(), {}) is None


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (Settings(tokens_file=Path("/etc/inboxd/tokens.toml")), "a tokens file"),
        (Settings(tls_cert=Path("c"), tls_key=Path("k")), "TLS (INBOXD_TLS_CERT)"),
        (Settings(listen="0.0.0.0:50051"), "a listen address beyond loopback"),
    ],
)
def test_each_production_sign_refuses_the_embedded_database_unless_asked(settings: Settings, named: str) -> None:
    refusal = embedded_refusal(settings, {})
    assert refusal is not None and named in refusal and "INBOXD_EMBEDDED=1" in refusal
    assert embedded_refusal(Settings(**{**settings.__dict__, "embedded": True}), {}) is None
    assert embedded_refusal(Settings(**{**settings.__dict__, "database_url": "postgresql:///x"}), {}) is None


def test_misspellings_of_database_url_are_noticed_and_others_not() -> None:
    env = {"DATABSE_URL": "x", "database_url": "y", "DATABASE_URI": "z", "INBOXD_LISTEN": "a", "HOME": "/"}
    assert sorted(near_misses(env)) == ["DATABASE_URI", "DATABSE_URL", "database_url"]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://inboxd:s3cret@db.internal:6432/inbox?sslmode=require",
         "host=db.internal port=6432 dbname=inbox user=inboxd"),
        ("host=a,b port=5432,5433 dbname=inbox user=u password=s3cret target_session_attrs=read-write",
         "host=a,b port=5432,5433 dbname=inbox user=u"),
        ("postgresql:///inbox", "host=(libpq's default socket) port=5432 dbname=inbox"),
    ],
)  # fmt: skip
def test_the_database_is_described_without_its_password(url: str, shown: str) -> None:
    assert describe_database(url) == shown
    assert "s3cret" not in describe_database(url)


def test_a_url_that_does_not_parse_says_so_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="does not parse") as caught:
        describe_database("host='unterminated password=s3cret")
    assert "s3cret" not in str(caught.value)
