"""Shared fixtures: real uvicorn servers on 127.0.0.1, ephemeral ports, stopped by themselves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from starlette.types import ASGIApp

from node.server.serve import make_server
from tests.servers import free_socket, wait_until_ready

AppFactory = Callable[[str], ASGIApp]
Serve = Callable[[AppFactory], Awaitable[str]]


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
