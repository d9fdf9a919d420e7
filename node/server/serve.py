"""Run an ASGI app with uvicorn from code: one path for the CLI, the launcher and the tests.

The loop and the HTTP parser are uvicorn's ``"auto"`` choices: uvloop and httptools when they
are installed (dependencies of the node), else asyncio and h11. :meth:`uvicorn.Server.run` makes
the loop; a caller that runs ``server.serve()`` on its own loop (tests, the registry) keeps its
loop and still gets httptools.
"""

from __future__ import annotations

import socket
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

Loop = Literal["auto", "asyncio", "uvloop"]
Http = Literal["auto", "h11", "httptools"]


def make_server(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    log_level: str = "warning",
    loop: Loop = "auto",
    http: Http = "auto",
) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        loop=loop,
        http=http,
    )
    return uvicorn.Server(config)


async def serve_app(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn installs the handlers)."""
    server = make_server(app, host, port, log_level=log_level)
    await server.serve(sockets=[sock] if sock else None)
