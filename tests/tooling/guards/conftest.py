"""A real HTTP server on 127.0.0.1 (ephemeral port) for the URL guard's fetch tests."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route


def build_app(stop: threading.Event) -> Starlette:
    async def echo(request: Request) -> Response:
        body = (await request.body()).decode()
        return JSONResponse(
            {
                "method": request.method,
                "host": request.headers.get("host"),
                "body": body,
                "authorization": request.headers.get("authorization"),
            }
        )

    async def redirect(request: Request) -> Response:
        port = request.url.port
        targets = {
            "private": "http://10.0.0.1/",
            "v6": f"http://[::1]:{port}/echo",
            "metadata": "http://169.254.169.254/latest/meta-data/",
            "self": "/echo",
            "localhost": f"http://localhost:{port}/echo",
            "loop": "/redirect/loop",
            "ftp": "ftp://127.0.0.1/",
        }
        code = int(request.query_params.get("code", "302"))
        return RedirectResponse(targets[request.path_params["name"]], status_code=code)

    async def big(request: Request) -> Response:
        return PlainTextResponse("x" * int(request.query_params.get("n", "1000")))

    async def stream(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(100):
                yield b"y" * 100

        return StreamingResponse(chunks(), media_type="text/plain")

    async def slow(request: Request) -> Response:
        await asyncio.to_thread(stop.wait, 30)
        return PlainTextResponse("late")

    async def latin(request: Request) -> Response:
        return Response("café".encode("latin-1"), media_type="text/plain; charset=latin-1")

    return Starlette(
        routes=[
            Route("/echo", echo, methods=["GET", "POST"]),
            Route("/redirect/{name}", redirect, methods=["GET", "POST"]),
            Route("/big", big),
            Route("/stream", stream),
            Route("/slow", slow),
            Route("/latin", latin),
        ]
    )


@pytest.fixture(scope="session")
def localhost_only() -> None:
    """These tests need ``localhost`` to resolve to 127.0.0.1 only (the guard allows that /32).

    A machine where it does not fails here, loudly, rather than skipping the tests.
    """
    addresses = {
        info[4][0] for info in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)
    }
    if addresses != {"127.0.0.1"}:
        pytest.fail(f"localhost resolves to {sorted(addresses)}, not only 127.0.0.1")


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """Base URL of a live server, run in a thread for the whole session."""
    stop = threading.Event()
    config = uvicorn.Config(build_app(stop), host="127.0.0.1", port=0, log_level="error")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert thread.is_alive(), "server crashed while starting"
        assert time.monotonic() < deadline, "server did not start in time"
        time.sleep(0.005)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    stop.set()
    srv.should_exit = True
    thread.join(10)
