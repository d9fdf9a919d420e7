"""Shared fixtures: apps in-process (``apps``), or real uvicorn servers on loopback (``serve``).

Prefer ``apps``; ``serve`` is for what must be reached through a socket: a server called by a node's
own HTTP client (peers, model endpoints, sites to fetch), or a response read while it streams.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from starlette.types import ASGIApp

from node.server.serve import make_server
from tests.servers import InProcessApps, free_socket, wait_until_ready

AppFactory = Callable[[str], ASGIApp]
Serve = Callable[[AppFactory], Awaitable[str]]


@pytest.fixture(autouse=True)
def _restore_signal_handlers() -> Iterator[None]:
    """Put back SIGINT/SIGTERM handlers after each test.

    Every uvicorn server installs its own and restores the previous ones when it stops; servers
    that overlap and stop out of order leave a stopped server's handler installed, and
    sse-starlette reads that server's ``should_exit`` to end every later SSE stream at once
    (in-process ones included).
    """
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
async def apps() -> AsyncIterator[InProcessApps]:
    """``url = await apps.start(lambda url: app)``; ``apps.client()`` reaches it in-process."""
    started = InProcessApps()
    try:
        yield started
    finally:
        await started.aclose()


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
