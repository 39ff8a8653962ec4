"""Settings from the environment and flags."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from inboxd.config.settings import ConfigError, load_settings, parse_duration, serving_refusal
from inboxd.serving.cli import warn_about_forced_settings


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


@pytest.mark.parametrize("retention", ["0", "0s", "59m", "3599s"])
def test_a_retention_under_the_floor_is_refused_with_the_way_to_force_it(retention: str) -> None:
    with pytest.raises(ConfigError, match=r"INBOXD_RETENTION=\S+ is under the floor of 1h.*INBOXD_RETENTION_FORCE=1"):
        load_settings({"INBOXD_RETENTION": retention})


def test_a_retention_flag_under_the_floor_is_refused_too() -> None:
    with pytest.raises(ConfigError, match="under the floor"):
        load_settings({}, {"retention": "30m"})


def test_a_retention_of_one_hour_is_at_the_floor_and_accepted() -> None:
    assert load_settings({"INBOXD_RETENTION": "1h"}).retention == timedelta(hours=1)


@pytest.mark.parametrize(
    ("env", "overrides"),
    [
        ({"INBOXD_RETENTION": "0", "INBOXD_RETENTION_FORCE": "1"}, {}),
        ({"INBOXD_RETENTION": "0", "INBOXD_RETENTION_FORCE": "true"}, {}),
        ({"INBOXD_RETENTION": "0"}, {"retention_force": "1"}),
    ],
)
def test_a_retention_under_the_floor_is_accepted_when_forced(
    env: dict[str, str], overrides: dict[str, str | None]
) -> None:
    settings = load_settings(env, overrides)
    assert settings.retention == timedelta(0)
    assert settings.retention_force


def test_a_forced_retention_is_logged_loudly(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings({"INBOXD_RETENTION": "10m", "INBOXD_RETENTION_FORCE": "1"})
    with caplog.at_level(logging.WARNING, logger="inboxd"):
        warn_about_forced_settings(settings)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "INBOXD_RETENTION=10m is under the floor of 1h" in record.getMessage()


def test_an_on_off_setting_that_is_neither_names_itself() -> None:
    with pytest.raises(ConfigError, match="INBOXD_TRUSTED_NETWORK"):
        load_settings({"INBOXD_TRUSTED_NETWORK": "maybe"})


def test_workers_default_to_one_and_stay_within_bounds() -> None:
    assert load_settings({}).workers == 1
    assert load_settings({"INBOXD_WORKERS": "4"}).workers == 4
    assert load_settings({}, {"workers": "2"}).workers == 2
    with pytest.raises(ConfigError, match="INBOXD_WORKERS must be between 1 and"):
        load_settings({"INBOXD_WORKERS": "0"})


TOKENS = {"INBOXD_TOKENS_FILE": "/etc/inboxd/tokens.toml"}
TLS = {"INBOXD_TLS_CERT": "/c.pem", "INBOXD_TLS_KEY": "/k.pem"}


def test_tokens_in_plaintext_beyond_loopback_are_refused() -> None:
    refusal = serving_refusal(load_settings({**TOKENS, "INBOXD_LISTEN": "0.0.0.0:50051"}))
    assert refusal is not None
    assert "without TLS: bearer tokens would cross the network in plaintext" in refusal
    assert "INBOXD_TRUSTED_NETWORK=1" in refusal


@pytest.mark.parametrize(
    "env",
    [
        {**TOKENS, "INBOXD_LISTEN": "127.0.0.1:50051"},
        {**TOKENS, **TLS, "INBOXD_LISTEN": "0.0.0.0:50051"},
        {**TOKENS, "INBOXD_LISTEN": "0.0.0.0:50051", "INBOXD_TRUSTED_NETWORK": "1"},
        {"INBOXD_LISTEN": "127.0.0.1:50051"},
    ],
    ids=["loopback", "tls", "trusted-network", "open-on-loopback"],
)
def test_serving_is_allowed_on_loopback_with_tls_or_on_a_trusted_network(env: dict[str, str]) -> None:
    assert serving_refusal(load_settings(env)) is None


def test_without_tokens_beyond_loopback_even_a_trusted_network_is_refused() -> None:
    refusal = serving_refusal(load_settings({"INBOXD_LISTEN": "0.0.0.0:1", "INBOXD_TRUSTED_NETWORK": "1"}))
    assert refusal is not None and "without a tokens file" in refusal


def test_a_trusted_network_is_logged_loudly(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings({**TOKENS, "INBOXD_LISTEN": "0.0.0.0:50051", "INBOXD_TRUSTED_NETWORK": "1"})
    with caplog.at_level(logging.WARNING, logger="inboxd"):
        warn_about_forced_settings(settings)
    [record] = caplog.records
    assert "INBOXD_TRUSTED_NETWORK is set: bearer tokens cross the network" in record.getMessage()


def test_the_lease_rescuer_brings_an_expired_lease_back_within_a_minute_by_default() -> None:
    defaults = load_settings({})
    assert defaults.rescue_grace + defaults.rescue_interval <= timedelta(minutes=1)
    tuned = load_settings({"INBOXD_RESCUE_GRACE": "2m", "INBOXD_RESCUE_INTERVAL": "0"})
    assert (tuned.rescue_grace, tuned.rescue_interval) == (timedelta(minutes=2), timedelta(0))
