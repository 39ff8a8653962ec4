"""Settings from the environment and flags."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.config import ConfigError, load_settings, parse_duration


def test_defaults_match_the_design() -> None:
    settings = load_settings({})
    assert settings.listen == "127.0.0.1:50051"
    assert settings.max_payload_bytes == 1024 * 1024
    assert settings.max_attempts == 10
    assert settings.retention == timedelta(days=7)
    assert settings.backoff_base == timedelta(seconds=1)
    assert settings.backoff_factor == 2.0
    assert settings.backoff_cap == timedelta(hours=1)
    assert not settings.listens_beyond_loopback()


def test_flags_override_the_environment() -> None:
    settings = load_settings({"INBOXD_MAX_ATTEMPTS": "3"}, {"max_attempts": "5", "retention": "2d"})
    assert settings.max_attempts == 5
    assert settings.retention == timedelta(days=2)


@pytest.mark.parametrize(("text", "seconds"), [("500ms", 0.5), ("30s", 30), ("15m", 900), ("2h", 7200), ("7", 7)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration("X", text).total_seconds() == seconds


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"INBOXD_MAX_ATTEMPTS": "zero"}, "INBOXD_MAX_ATTEMPTS"),
        ({"INBOXD_MAX_ATTEMPTS": "0"}, "at least 1"),
        ({"INBOXD_RETENTION": "soon"}, "INBOXD_RETENTION"),
        ({"INBOXD_MAX_PAYLOAD_BYTES": "1TB"}, "INBOXD_MAX_PAYLOAD_BYTES"),
        ({"INBOXD_TLS_CERT": "/c.pem"}, "go together"),
        ({"INBOXD_LISTEN": "50051"}, "host and a port"),
    ],
)
def test_bad_settings_name_themselves(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        load_settings(env)


@pytest.mark.parametrize(
    ("listen", "beyond"),
    [("127.0.0.1:1", False), ("localhost:1", False), ("[::1]:1", False), ("0.0.0.0:1", True), ("[::]:1", True)],
)
def test_loopback_detection(listen: str, beyond: bool) -> None:
    assert load_settings({"INBOXD_LISTEN": listen}).listens_beyond_loopback() is beyond
