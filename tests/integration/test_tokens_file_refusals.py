"""A broken tokens file is refused with its reason at start-up, and on SIGHUP leaves the tokens in force."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from inboxd.config.tokens import Scope, TokensFileError, entry_toml, load_tokens_file, new_token
from inboxd_client.v1 import inbox_pb2_grpc
from tests.harness import serve_on_free_port
from tests.integration.helpers import accept_request

BROKEN = {
    "a string where the entries go": (b'token = "x"\n', "'token' must be entries, each under its own [[token]] header"),
    "not UTF-8": (b'[[token]]\nname = "caf\xe9"\n', "is not UTF-8 (byte 21)"),
}
# On SIGHUP too: a file made writable by anybody is refused and the tokens in force stay.
WRITABLE_BY_ANYBODY = "is writable by every local account (mode 0666)"


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_tokens_file_stops_start_up_with_its_reason_not_a_traceback(
    database_url: str, tmp_path: Path, case: str
) -> None:
    text, reason = BROKEN[case]
    file = tmp_path / "tokens.toml"
    file.write_bytes(text)
    env = {**os.environ, "DATABASE_URL": database_url, "INBOXD_LISTEN": "127.0.0.1:0", "INBOXD_TOKENS_FILE": str(file)}
    done = subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert f"inboxd: tokens file {file}" in done.stderr
    assert reason in done.stderr
    assert "Traceback" not in done.stderr


async def test_a_broken_tokens_file_on_sighup_is_not_reloaded_and_the_tokens_stay(
    database_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "tokens.toml"
    token = new_token()
    file.write_text(entry_toml("edge", token, [Scope.ACCEPT], ["*"]))
    log = tmp_path / "stderr.log"
    proc, port = await asyncio.to_thread(
        serve_on_free_port,
        database_url,
        {"INBOXD_TOKENS_FILE": str(file), "INBOXD_RESCUE_INTERVAL": "0"},
        timeout=30,
        stderr_log=log,
    )
    try:
        for case in sorted(BROKEN):
            text, reason = BROKEN[case]
            file.write_bytes(text)
            said = log.read_text(errors="replace").count("tokens file not reloaded")
            proc.send_signal(signal.SIGHUP)
            for _ in range(200):  # bounded: the reload is asynchronous to us
                if log.read_text(errors="replace").count("tokens file not reloaded") > said:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"{case}: no 'tokens file not reloaded' in {log.read_text(errors='replace')}")
            assert reason in log.read_text(errors="replace")
        file.write_text(entry_toml("edge", token, [Scope.ACCEPT], ["*"]))
        os.chmod(file, 0o666)
        said = log.read_text(errors="replace").count(WRITABLE_BY_ANYBODY)
        proc.send_signal(signal.SIGHUP)
        for _ in range(200):
            if log.read_text(errors="replace").count(WRITABLE_BY_ANYBODY) > said:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"no refusal of a world-writable file in {log.read_text(errors='replace')}")
        output = log.read_text(errors="replace")
        assert "Traceback" not in output and "Exception in callback" not in output
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = inbox_pb2_grpc.InboxServiceStub(channel)
            await stub.Accept(accept_request("tokens/sighup", "k"), metadata=[("authorization", f"Bearer {token}")])
    finally:
        proc.kill()
        proc.wait()


def test_a_tokens_file_anybody_may_rewrite_stops_start_up(database_url: str, tmp_path: Path) -> None:
    """Whoever can write the tokens file can mint an admin token: refused as sshd refuses such files."""
    file = tmp_path / "tokens.toml"
    file.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]))
    os.chmod(file, 0o666)
    env = {**os.environ, "DATABASE_URL": database_url, "INBOXD_LISTEN": "127.0.0.1:0", "INBOXD_TOKENS_FILE": str(file)}
    done = subprocess.run(
        [sys.executable, "-m", "inboxd", "serve"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert f"is writable by every local account (mode 0666): chmod o-w {file}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_tokens_file_in_a_folder_anybody_may_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    os.chmod(folder, 0o777)
    file = folder / "tokens.toml"
    file.write_text(entry_toml("edge", new_token(), [Scope.ACCEPT], ["*"]))
    os.chmod(file, 0o600)
    with pytest.raises(TokensFileError, match=r"folder .* is writable by every local account"):
        load_tokens_file(file)
    os.chmod(folder, 0o1777)  # sticky, as /tmp: nobody may replace another's file
    assert len(load_tokens_file(file)) == 1
