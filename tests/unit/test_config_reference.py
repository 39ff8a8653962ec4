"""docs/configuration.md is what `make config-doc` makes from the table of settings, and every setting is described."""

from __future__ import annotations

from pathlib import Path

from inboxd.config.settings import env_names
from inboxd.serving.config_reference import MEANINGS, render

PAGE = Path(__file__).resolve().parents[2] / "docs/configuration.md"


def test_the_page_is_generated_from_the_table() -> None:
    assert PAGE.read_text() == render(), "docs/configuration.md is stale: run make config-doc"


def test_every_setting_has_a_meaning_and_every_meaning_a_setting() -> None:
    variables = set(env_names().values())
    assert variables - MEANINGS.keys() == set(), "describe the new settings in serving/config_reference.py"
    assert MEANINGS.keys() - variables == set(), "these settings are gone: drop their meanings"


def test_the_page_shows_each_default_as_a_setting_writes_it() -> None:
    text = PAGE.read_text()
    assert "| `INBOXD_RETENTION` | `--retention` | `7d` |" in text
    assert "| `INBOXD_MAX_PAYLOAD_BYTES` | `--max-payload-bytes` | `1MiB` |" in text
    assert "| `INBOXD_BACKOFF_FACTOR` |  | `2` |" in text
    assert "| `INBOXD_STALE_REVISIONS` | `--stale-revisions` | `ignore` |" in text
    assert "| `INBOXD_TRUSTED_NETWORK` | `--trusted-network` | unset |" in text
