"""The edge benchmark's floor: `python -m bench.bare_app`, a bare aiohttp app that answers 200 to any POST.

It reads each body in full (the edge must, to verify it) and answers what the
edge answers on success, `{"outcome": "accepted"}` as JSON, with no signature
check, no forwarding and no log line. It runs the event loop the edge runs
(asyncio's own: the edge installs no other), so edge ÷ bare app is what the
edge's own work costs, on the same HTTP server and loop. It prints
`bare app listening on HOST:PORT` once it serves.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiohttp import web

ANSWER = b'{"outcome": "accepted"}'


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=ANSWER, content_type="application/json")


def application() -> web.Application:
    app = web.Application()
    app.router.add_post("/{tail:.*}", answer)
    return app


async def serve(host: str, port: int) -> None:
    runner = web.AppRunner(application(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    print(f"bare app listening on {bound[0]}:{bound[1]}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str]) -> int:
    host, _, port = (argv[1] if len(argv) > 1 else "127.0.0.1:0").rpartition(":")
    asyncio.run(serve(host or "127.0.0.1", int(port)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
