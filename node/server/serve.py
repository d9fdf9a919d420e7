"""Run an ASGI app with uvicorn from code: one path for the CLI, the launcher and the tests.

The loop and the HTTP parser are uvicorn's ``"auto"`` choices: uvloop and httptools when they
are installed (dependencies of the node), else asyncio and h11. With httptools the protocol is
:class:`~node.server.http_protocol.OneWriteHttpToolsProtocol` (a sized response's head and body
in one socket write); ``http="httptools-uvicorn"`` is uvicorn's own, for comparisons.
:meth:`uvicorn.Server.run` makes the loop; a caller that runs ``server.serve()`` on its own loop
(tests, the registry) keeps its loop and still gets httptools.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

Loop = Literal["auto", "asyncio", "uvloop"]
Http = Literal["auto", "h11", "httptools", "httptools-uvicorn"]


def http_protocol(http: Http = "auto") -> type[asyncio.Protocol] | str:
    """The ``http`` given to :class:`uvicorn.Config` for the choice ``http``."""
    if http == "httptools-uvicorn":
        return "httptools"
    if http == "h11" or (http == "auto" and importlib.util.find_spec("httptools") is None):
        return "h11"
    from node.server.http_protocol import OneWriteHttpToolsProtocol

    return OneWriteHttpToolsProtocol


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
        http=http_protocol(http),
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
