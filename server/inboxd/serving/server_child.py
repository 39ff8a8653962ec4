"""One of the server processes of `inboxd serve --workers N`; the supervisor starts it, never a person.

Run as `python -m inboxd.serving.server_child`, a fresh interpreter (gRPC must not be
forked once initialised). It reads its `ChildSpec` from the first line of
stdin, creates its own event loop, pool and gRPC server on the shared port
(SO_REUSEPORT), and writes `ready` on stdout once it serves. It stops,
finishing in-flight calls within the shutdown grace, on SIGTERM or SIGINT, or
when stdin closes: then the parent is gone and nobody would supervise it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import pickle
import signal
import sys
from dataclasses import dataclass

from inboxd.config.settings import Settings
from inboxd.config.tokens import TokenRegistry, TokensFileError
from inboxd.observability.logs import configure_logging
from inboxd.serving import event_loop
from inboxd.serving.server import freeze_start_up_objects, start_server
from inboxd.serving.tls_reload import ServerCertificates
from inboxd.serving.tracing_setup import start_process_tracing, stop_process_tracing
from inboxd.store.database import Database

log = logging.getLogger("inboxd")

READY = "ready"


@dataclass(frozen=True)
class ChildSpec:
    """What the parent tells a child: which one it is, its settings (a concrete port), its database."""

    index: int
    settings: Settings
    database_url: str

    def encode(self) -> bytes:
        # Pickle is safe here: the parent writes it to the stdin of a child it just started.
        return base64.b64encode(pickle.dumps(self)) + b"\n"

    @staticmethod
    def decode(line: bytes) -> ChildSpec:
        spec = pickle.loads(base64.b64decode(line))  # from our own parent, see encode
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"expected a ChildSpec on stdin, got {type(spec).__name__}")
        return spec


async def _stdin_reader() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def _reload_on_sighup(registry: TokenRegistry | None, index: int, certificates: list[ServerCertificates]) -> None:
    """From the start, so an early SIGHUP never kills the process; `certificates` is filled once serving."""

    def reload() -> None:
        if registry is not None:
            try:
                count = registry.reload()
                log.info("server process %d: tokens file %s reloaded: %d tokens", index, registry.path, count)
            except TokensFileError as exc:
                log.error("server process %d: tokens file not reloaded, the previous tokens stay: %s", index, exc)
        for certificate in certificates:
            certificate.reload_logged(log, f"server process {index}: ")

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)


async def serve_child() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stdin = await _stdin_reader()
    spec = ChildSpec.decode(await stdin.readline())
    settings = spec.settings
    registry = TokenRegistry(settings.tokens_file) if settings.tokens_file else None
    certificates: list[ServerCertificates] = []
    _reload_on_sighup(registry, spec.index, certificates)
    # Its own provider, in this fresh interpreter: the parent checked the variables before starting it.
    start_process_tracing()
    db = Database(spec.database_url, max_size=settings.pool_size)
    await db.open()
    try:
        running = await start_server(settings, db, registry=registry, worker_index=spec.index)
        if running.certificates is not None:
            certificates.append(running.certificates)
        freeze_start_up_objects()
        print(READY, flush=True)
        parent_gone = asyncio.create_task(stdin.read())  # returns at EOF: the parent closed our stdin
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({parent_gone, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            log.warning("server process %d: the parent is gone; stopping", spec.index)
        for task in (parent_gone, stopped):
            task.cancel()
        await running.stop(settings.shutdown_grace.total_seconds())
    finally:
        await db.close()
        await stop_process_tracing()


def main() -> int:
    configure_logging(sys.stderr)
    try:
        event_loop.run(serve_child())
    except Exception:
        log.exception("server process failed")
        return 1
    return 0


if __name__ == "__main__":
    # Through the imported module, not this __main__ copy: the pickled ChildSpec names inboxd.serving.server_child.
    from inboxd.serving.server_child import main as imported_main

    raise SystemExit(imported_main())
