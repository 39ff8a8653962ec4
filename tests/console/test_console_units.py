"""The console's pure parts: where it may listen, CSRF tokens, event references, escaping."""

from __future__ import annotations

from datetime import timedelta

import pytest

from inboxd.config.settings import ConfigError, load_settings
from inboxd.config.tokens import ANONYMOUS
from inboxd.console.hosts import AllowedHosts
from inboxd.console.pages import event_ref, overview_fragment, parse_event_ref
from inboxd.console.security import InstanceKey, OpenSecret, exposure_refusal, is_loopback
from inboxd.console.sessions import Sessions
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
    sessions = Sessions(lambda: 0.0)
    _, one = sessions.open(ANONYMOUS, None)
    _, two = sessions.open(ANONYMOUS, None)
    assert one.csrf_matches(one.csrf)
    assert one.csrf != two.csrf
    assert not two.csrf_matches(one.csrf)
    assert not one.csrf_matches("")
    assert not one.csrf_matches(None)
    assert not one.csrf_matches(one.csrf[:-1] + ("0" if one.csrf[-1] != "0" else "1"))


def test_the_sign_in_forms_csrf_token_needs_this_consoles_key_not_just_the_nonce() -> None:
    key, other = InstanceKey(), InstanceKey()
    token = key.signin_csrf("nonce-planted-by-a-page")
    assert key.signin_csrf_matches("nonce-planted-by-a-page", token)
    assert not other.signin_csrf_matches("nonce-planted-by-a-page", token)
    assert not key.signin_csrf_matches("another-nonce", token)
    assert not key.signin_csrf_matches(None, token)


def test_sessions_end_when_idle_at_their_expiry_and_on_close() -> None:
    now = [0.0]
    sessions = Sessions(lambda: now[0], max_age=100.0, idle=30.0, capacity=2)
    idle_id, _ = sessions.open(ANONYMOUS, None)
    now[0] = 29.0
    assert sessions.find(idle_id) is not None
    now[0] = 58.0
    assert sessions.find(idle_id, touch=False) is not None  # not activity: the clock keeps running
    now[0] = 59.0
    assert sessions.find(idle_id) is None
    busy_id, _ = sessions.open(ANONYMOUS, None)
    for t in range(80, 159, 20):
        now[0] = float(t)
        assert sessions.find(busy_id) is not None, t
    now[0] = 159.0
    assert sessions.find(busy_id) is None, "lived past its absolute expiry"
    closed_id, _ = sessions.open(ANONYMOUS, None)
    sessions.close(closed_id)
    assert sessions.find(closed_id) is None
    assert sessions.find("") is None and sessions.find("made-up") is None


def test_the_session_table_is_bounded_and_drops_the_least_recently_used() -> None:
    now = [0.0]
    sessions = Sessions(lambda: now[0], capacity=2)
    first, _ = sessions.open(ANONYMOUS, None)
    now[0] = 1.0
    second, _ = sessions.open(ANONYMOUS, None)
    now[0] = 2.0
    assert sessions.find(first) is not None  # now the second is the least recently used
    sessions.open(ANONYMOUS, None)
    assert len(sessions) == 2
    assert sessions.find(second) is None and sessions.find(first) is not None


def test_open_modes_secret_signs_in_once_and_is_then_replaced() -> None:
    secret = OpenSecret()
    first = secret.value
    assert not secret.redeem("") and not secret.redeem(None) and not secret.redeem(first + "x")
    assert secret.redeem(first)
    assert secret.value != first
    assert not secret.redeem(first)


def test_allowed_hosts_are_loopbacks_names_the_listen_address_and_configured_ones_with_the_port() -> None:
    hosts = AllowedHosts("10.0.0.5", 8080, ["Console.Example.com", "ops.example.com:8443"], https=False)
    for good in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "10.0.0.5:8080", "console.example.com",
                 "console.example.com:8080", "ops.example.com:8443"):  # fmt: skip
        assert hosts.allows(good), good
    for bad in (None, "", "localhost", "localhost:8081", "evil.example:8080", "ops.example.com", "10.0.0.5"):
        assert not hosts.allows(bad), bad
    assert AllowedHosts("::1", 80, https=False).allows("[::1]:80")
    assert not AllowedHosts("0.0.0.0", 80, https=False).allows("0.0.0.0:80")


def test_a_post_is_refused_unless_it_comes_from_the_consoles_own_origin() -> None:
    hosts = AllowedHosts("127.0.0.1", 8080, ["console.example.com"], https=False)
    assert hosts.cross_site_refusal("http://127.0.0.1:8080", "same-origin") is None
    assert hosts.cross_site_refusal("http://console.example.com", None) is None
    assert hosts.cross_site_refusal(None, "same-origin") is None
    assert hosts.cross_site_refusal(None, None) is None  # no browser: the CSRF token still applies
    assert hosts.cross_site_refusal("null", "same-origin") is None  # our own form under no-referrer
    refused: list[tuple[str | None, str | None]] = [
        ("http://127.0.0.1:3000", "same-site"),
        ("null", "cross-site"),
        ("null", None),
        ("http://127.0.0.1:8080", "same-site"),
        (None, "none"),
        ("https://127.0.0.1:8080", None),
        ("http://attacker.example", None),
        (None, "same-site"),
        (None, "cross-site"),
    ]
    for origin, site in refused:
        assert hosts.cross_site_refusal(origin, site) is not None, (origin, site)
    secure = AllowedHosts("127.0.0.1", 8080, ["console.example.com"], https=True)
    assert secure.cross_site_refusal("https://console.example.com", None) is None
    assert secure.cross_site_refusal("http://console.example.com", None) is not None


def test_console_hosts_and_https_come_from_the_environment_or_the_flags() -> None:
    loaded = load_settings({"INBOXD_CONSOLE_HOSTS": " Console.Example.com, ops:8443 ,", "INBOXD_CONSOLE_HTTPS": "1"})
    assert loaded.console_hosts == ("console.example.com", "ops:8443")
    assert loaded.console_https is True
    assert load_settings({}).console_hosts == () and load_settings({}).console_https is False
    with pytest.raises(ConfigError, match="INBOXD_CONSOLE_HOSTS"):
        load_settings({"INBOXD_CONSOLE_HOSTS": "https://console.example.com/"})


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
