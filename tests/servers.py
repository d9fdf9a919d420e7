"""Run ASGI apps for tests: in-process behind an httpx transport, or real uvicorn servers.

In-process (:class:`InProcessApps`) is the default for one node's HTTP surface: the app runs with
its real lifespan and httpx talks to it through ``httpx.ASGITransport``, with no socket. That
transport buffers each response whole, so a test that needs a live stream (reading events while
the node still works, or cancelling mid-stream), a subprocess, or a node calling another node
through its own HTTP client uses a real server (:func:`running`) on a loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
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
    async with serving(uvicorn.Server(config), sock) as url:
        yield url


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server, sock: socket.socket) -> AsyncIterator[str]:
    """Run a configured uvicorn ``server`` on ``sock`` until the block ends; yield its base URL."""
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


class AppRouter(httpx.AsyncBaseTransport):
    """Send each request to the in-process app mounted at its origin, else over the network.

    The client's read timeout bounds each in-process request as a whole (``ASGITransport`` has
    none of its own), so a hung handler fails the test instead of hanging it.
    """

    def __init__(self, apps: Mapping[str, httpx.ASGITransport]) -> None:
        self.apps = apps
        self.network = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        app = self.apps.get(f"{request.url.scheme}://{request.url.netloc.decode()}")
        if app is None:
            return await self.network.handle_async_request(request)
        timeout = request.extensions.get("timeout", {}).get("read")
        try:
            return await asyncio.wait_for(app.handle_async_request(request), timeout)
        except TimeoutError as exc:
            raise httpx.ReadTimeout(f"no answer within {timeout}s", request=request) from exc

    async def aclose(self) -> None:
        await self.network.aclose()


class InProcessApps:
    """ASGI apps running in this process with their lifespans, each at its own made-up origin.

    ``url = await apps.start(lambda url: app)`` starts one until ``aclose`` (which ends the
    lifespans, last started first); ``async with apps.serving(...) as url`` runs one for a block.
    ``apps.client()`` is an httpx client reaching every app running here (and anything else over
    the network).
    """

    def __init__(self) -> None:
        self._apps: dict[str, httpx.ASGITransport] = {}
        self._stack = contextlib.AsyncExitStack()
        self._names = itertools.count(1)

    async def start(self, factory: Callable[[str], Starlette], name: str = "app") -> str:
        """Start the app ``factory(url)`` until :meth:`aclose`; its URL."""
        return await self._stack.enter_async_context(self.serving(factory, name))

    @contextlib.asynccontextmanager
    async def serving(
        self, factory: Callable[[str], Starlette], name: str = "app"
    ) -> AsyncIterator[str]:
        """Run the app ``factory(url)`` until the block ends (its lifespan closes); its URL."""
        url = f"http://{name}-{next(self._names)}.test"
        app = factory(url)
        async with app.router.lifespan_context(app):
            self._apps[url] = httpx.ASGITransport(app=app)
            try:
                yield url
            finally:
                del self._apps[url]

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        """A new client for these apps; close it (``async with``) when done."""
        kwargs.setdefault("timeout", 15.0)
        return httpx.AsyncClient(transport=AppRouter(self._apps), **kwargs)

    async def aclose(self) -> None:
        await self._stack.aclose()
