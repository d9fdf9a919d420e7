"""Shared fixtures: real uvicorn servers on 127.0.0.1, ephemeral ports, stopped by themselves."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from starlette.types import ASGIApp

from node.server.serve import make_server

AppFactory = Callable[[str], ASGIApp]
Serve = Callable[[AppFactory], Awaitable[str]]


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


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


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``url = await serve(lambda url: app)``: run the app on a free loopback port."""
    servers: list[tuple[object, asyncio.Task[None]]] = []

    async def start(factory: AppFactory, ready_path: str = "/healthz") -> str:
        sock = free_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = make_server(factory(url), "127.0.0.1", 0)
        server.config.lifespan = "on"
        task = asyncio.create_task(server.serve(sockets=[sock]))
        servers.append((server, task))
        await wait_until_ready(url, ready_path)
        return url

    yield start
    for server, _task in servers:
        server.should_exit = True  # type: ignore[attr-defined]
    for _, task in servers:
        await asyncio.wait_for(task, timeout=10)
