"""Run an ASGI app with uvicorn from code: one path for the CLI, the launcher and the tests."""

from __future__ import annotations

import socket

import uvicorn
from starlette.types import ASGIApp


def make_server(
    app: ASGIApp, host: str, port: int, *, log_level: str = "warning"
) -> uvicorn.Server:
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on"
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
