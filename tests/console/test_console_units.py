"""The console's pure parts: where it may listen, CSRF tokens, event references, escaping."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.config.settings import ConfigError, load_settings
from inboxd.console.pages import event_ref, overview_fragment, parse_event_ref
from inboxd.console.security import csrf_matches, csrf_token, exposure_refusal, is_loopback
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.operator_views import NamespaceStats


@pytest.mark.parametrize("listen", ["127.0.0.1:8080", "[::1]:8080", "localhost:0", "127.0.0.2:80"])
def test_loopback_addresses_are_always_allowed(listen: str) -> None:
    assert is_loopback(listen)
    assert exposure_refusal(listen, tokens_file=False, tls=False, trusted_network=False) is None


@pytest.mark.parametrize("listen", ["0.0.0.0:8080", ":8080", "[::]:8080", "10.0.0.5:8080", "console.internal:80"])
def test_the_console_is_refused_beyond_loopback_without_a_tokens_file(listen: str) -> None:
    refusal = exposure_refusal(listen, tokens_file=False, tls=True, trusted_network=True)
    assert refusal is not None and "without a tokens file" in refusal and listen in refusal


def test_the_console_is_refused_beyond_loopback_in_plaintext_unless_the_network_is_trusted() -> None:
    refusal = exposure_refusal("0.0.0.0:8080", tokens_file=True, tls=False, trusted_network=False)
    assert refusal is not None and "without TLS" in refusal and "INBOXD_TRUSTED_NETWORK" in refusal
    assert exposure_refusal("0.0.0.0:8080", tokens_file=True, tls=True, trusted_network=False) is None
    assert exposure_refusal("0.0.0.0:8080", tokens_file=True, tls=False, trusted_network=True) is None


def test_console_listen_comes_from_the_environment_or_the_flag_and_needs_a_port() -> None:
    assert load_settings({}).console_listen is None
    assert load_settings({"INBOXD_CONSOLE_LISTEN": "127.0.0.1:8080"}).console_listen == "127.0.0.1:8080"
    flagged = load_settings({"INBOXD_CONSOLE_LISTEN": "127.0.0.1:8080"}, {"console_listen": "127.0.0.1:9090"})
    assert flagged.console_listen == "127.0.0.1:9090"
    with pytest.raises(ConfigError, match="INBOXD_CONSOLE_LISTEN"):
        load_settings({"INBOXD_CONSOLE_LISTEN": "8080"})


def test_a_csrf_token_belongs_to_one_session() -> None:
    token = csrf_token("ibx_session_one")
    assert csrf_matches("ibx_session_one", token)
    assert not csrf_matches("ibx_session_two", token)
    assert not csrf_matches("ibx_session_one", "")
    assert not csrf_matches(None, token)
    assert not csrf_matches("ibx_session_one", token[:-1] + ("0" if token[-1] != "0" else "1"))


def test_an_event_reference_round_trips_any_identity_and_refuses_anything_else() -> None:
    for identity in [("shop/acct_1", "evt_1"), ("ns with spaces", "key/with|bars and ünicode"), ("a", "\"'<>")]:
        assert parse_event_ref(event_ref(*identity)) == identity
    for bad in ["", "not base64!", "WzFd", event_ref("a", "b")[:-2]]:
        with pytest.raises(InvalidArgument, match="event"):
            parse_event_ref(bad)


def test_names_from_the_database_are_escaped_never_markup() -> None:
    hostile = NamespaceStats('<script>alert("x")</script>', dead_lettered=1, oldest_claimable_age=timedelta(seconds=75))
    shown = overview_fragment([hostile])
    assert "<script>" not in shown
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in shown
    assert "1m15s" in shown
