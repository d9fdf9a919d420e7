"""What ``make_server(...).run()`` (``a2a-node serve``) serves on: uvloop and httptools."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from node.server.serve import make_server
from tests.servers import free_socket


def loop_app() -> Starlette:
    async def which(request: Request) -> JSONResponse:
        return JSONResponse({"loop": type(asyncio.get_running_loop()).__module__})

    return Starlette(routes=[Route("/loop", which)])


@pytest.mark.parametrize(
    ("loop", "http", "expected_loop", "protocol"),
    [
        ("auto", "auto", "uvloop", HttpToolsProtocol),
        ("asyncio", "h11", "asyncio.unix_events", H11Protocol),
    ],
)
def test_run_serves_on_the_chosen_loop_and_parser(
    loop: str, http: str, expected_loop: str, protocol: type
) -> None:
    sock = free_socket()
    server = make_server(loop_app(), "127.0.0.1", 0, loop=loop, http=http)  # type: ignore[arg-type]
    runner = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    runner.start()
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/loop"
        with httpx.Client(timeout=5) as client:
            for _ in range(500):  # up to ~10 s on a loaded machine
                if server.started:
                    break
                runner.join(0.02)
            assert server.started
            assert client.get(url).json() == {"loop": expected_loop}
        assert server.config.http_protocol_class is protocol
    finally:
        server.should_exit = True
        runner.join(10)
    assert not runner.is_alive()


def test_auto_picks_uvloop_when_installed() -> None:
    assert make_server(loop_app(), "127.0.0.1", 0).config.get_loop_factory() is (
        uvloop.new_event_loop
    )
