"""`inboxd migrate` offers only what it reads: where the database is, none of the server's flags."""

from __future__ import annotations

import pytest

from inboxd.config.settings import env_names
from inboxd.serving.cli import build_parser, main


def test_migrate_help_lists_only_the_database_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["migrate", "--help"])
    shown = capsys.readouterr().out
    assert "--database-url" in shown and "--data-dir" in shown
    for serving_only in ("--listen", "--tokens-file", "--workers", "--console-listen", "--trusted-network"):
        assert serving_only not in shown


def test_serve_keeps_every_flag() -> None:
    args = build_parser().parse_args(["serve", "--listen", "127.0.0.1:0", "--workers", "2", "--trusted-network"])
    assert (args.listen, args.workers, args.trusted_network) == ("127.0.0.1:0", "2", "1")


def test_a_server_flag_given_to_migrate_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "--listen", "0.0.0.0:1"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --listen" in capsys.readouterr().err


def test_help_names_every_environment_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    serve = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["stats", "--help"])
    stats = capsys.readouterr().out
    for variable in ("INBOXD_TARGET", "INBOXD_TLS_CA", "INBOXD_TOKEN", "INBOXD_LOG_LEVEL", "DATABASE_URL"):
        assert variable in top, variable
    assert "INBOXD_TARGET" in stats and "INBOXD_TLS_CA" in stats
    for variable in env_names().values():
        assert variable in serve or variable in top, f"{variable} is named by no --help"
