"""Run ASGI apps for tests: real uvicorn servers on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.types import ASGIApp


def free_socket() -> socket.socket:
    """A socket bound to an ephemeral loopback port, not listening (connections are refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def url_of(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextlib.asynccontextmanager
async def running(app: ASGIApp, sock: socket.socket, *, lifespan: str = "on") -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on ``sock`` until the block ends; yield its base URL."""
    config = uvicorn.Config(
        app,
        lifespan=lifespan,
        log_level="warning",
        access_log=False,
        ws="none",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + 10
    while not server.started:
        if task.done() or time.monotonic() > deadline:
            server.should_exit = True
            await task
            raise RuntimeError("server did not start")
        await asyncio.sleep(0.005)
    try:
        yield url_of(sock)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


async def wait_until_ready(url: str, path: str = "/healthz", timeout: float = 10.0) -> None:
    """Poll ``url + path`` until it answers 2xx, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=1.0) as client:
        while True:
            try:
                if (await client.get(url + path)).is_success:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}{path} not ready after {timeout}s")
            await asyncio.sleep(0.02)
