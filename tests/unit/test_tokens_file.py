"""The tokens file: every mistake in it is refused with the file and the entry named, never loaded in part."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from inboxd.config.tokens import Scope, TokenRegistry, TokensFileError, entry_toml, hash_token, load_tokens_file

DIGEST = hash_token("ibx_one")


def _entry(name: str = "edge", digest: str = DIGEST, extra: str = "") -> str:
    return f'[[token]]\nname = "{name}"\nsha256 = "{digest}"\nscopes = ["accept"]\nnamespaces = ["*"]\n{extra}'


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('token = "x"\n', "'token' must be entries, each under its own [[token]] header"),
        ("token = [1, 2]\n", "'token' must be entries"),
        (_entry().replace("[[token]]", "[[tokens]]"), "unknown key 'tokens': each entry goes under [[token]]"),
        ("version = 2\n" + _entry(), "unknown key 'version'"),
        (_entry(extra='scope = ["admin"]\n'), "[[token]] #1 (edge): unknown key 'scope'; an entry has name, sha256"),
        (
            _entry("first") + _entry("second"),
            "[[token]] #2 (second): its sha256 is also entry 'first''s: one token, one entry",
        ),
        (_entry("same", hash_token("a")) + _entry("same", hash_token("b")), "#2 (same): the name 'same' is used twice"),
    ],
)
def test_a_mistake_in_the_tokens_file_is_refused_naming_the_file_and_the_entry(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with pytest.raises(TokensFileError) as refused:
        load_tokens_file(path)
    assert str(path) in str(refused.value)
    assert fragment in str(refused.value)


def test_a_tokens_file_that_is_not_utf8_is_refused_with_the_offending_byte(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_bytes(b'[[token]]\nname = "caf\xe9"\n')
    with pytest.raises(TokensFileError, match=r"tokens\.toml is not UTF-8 \(byte 21\)"):
        load_tokens_file(path)


def test_a_reload_that_is_refused_keeps_the_tokens_in_force(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(entry_toml("edge", "ibx_one", [Scope.ACCEPT], ["*"]))
    registry = TokenRegistry(path)
    for broken in (b'token = "x"\n', b"\xff\xfe", b"[[tokens]]\n"):
        path.write_bytes(broken)
        with pytest.raises(TokensFileError):
            registry.reload()
        assert registry.authenticate("ibx_one").name == "edge"


@pytest.mark.parametrize("text", ["", "# every token revoked\n"])
def test_a_tokens_file_without_tokens_is_said_at_start_and_on_reload(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with caplog.at_level(logging.WARNING, logger="inboxd.config.tokens"):
        registry = TokenRegistry(path)
        assert registry.reload() == 0
    said = [r.getMessage() for r in caplog.records if "holds no tokens" in r.getMessage()]
    assert said == [f"tokens file {path} holds no tokens: every call will be refused UNAUTHENTICATED"] * 2
