"""The benchmark's MCP server: the example app's Starlette app (``examples/app_server.py``,
official SDK, tools ``echo``, ``large``, ``size``) under uvicorn on 127.0.0.1.

    python bench/_server.py [--sse] [--nagle] [--unix PATH]

Prints ``LISTENING <url>`` on stdout once it accepts connections; stops on SIGTERM. With
``--unix PATH`` the same server also listens on a Unix domain socket at PATH (its folder
must be private), and a second line says where: ``LISTENING <http+unix://…>``.

Why not ``examples/app_server.py --port 0`` itself: it creates its listening socket as
``socket.socket(AF_INET, SOCK_STREAM)`` (proto 0), and asyncio (CPython < 3.12) turns on
TCP_NODELAY only for sockets whose proto is IPPROTO_TCP. uvicorn writes each response as
two sends (head, then body), so with Nagle on the body waits for the client's delayed ACK:
~40 ms on every reply, which would hide everything the benchmark measures. Here the
socket is made with IPPROTO_TCP (``--nagle`` reproduces the example's behaviour).
Also: no access log, keep-alive 75 s (pooled connections stay open across phases).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse", action="store_true", help="SSE replies (default: JSON bodies)")
    parser.add_argument("--nagle", action="store_true", help="listen with proto 0 as the example app does")
    parser.add_argument("--unix", help="also listen on a Unix domain socket at this path")
    args = parser.parse_args()

    # Our root handler first: the SDK's own logging setup then leaves it alone (no per-session INFO lines).
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    sys.path.insert(0, str(ROOT / "examples"))
    import app_server  # type: ignore[import-not-found]
    import uvicorn

    app = app_server.build_app(json_response=not args.sse, host="127.0.0.1", unix_socket=bool(args.unix))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0 if args.nagle else socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    sockets = [sock]
    if args.unix:
        from bridge.appserver.unixsocket import bind_private_socket
        from bridge.core.unixurl import unix_url

        sockets.append(bind_private_socket(Path(args.unix))[0])
        url += "\nLISTENING " + unix_url(args.unix, "/mcp")
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=75,
                            timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=sockets))
        while not server.started:
            if task.done():
                await task
                return
            await asyncio.sleep(0.01)
        print(f"LISTENING {url}", flush=True)
        await task

    asyncio.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
