"""OneWriteHttpToolsProtocol: uvicorn's bytes, a sized response in one write, streams per event."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from node.server.http_protocol import UVICORN, OneWriteCycle, OneWriteHttpToolsProtocol
from node.server.serve import http_protocol, make_server
from tests.servers import free_socket

GET = b"GET /json HTTP/1.1\r\nhost: x\r\n\r\n"


class SpyTransport(asyncio.Transport):
    """Records what the protocol writes (the boundary: asyncio's transport interface)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def app() -> Starlette:
    async def json(_: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "text": "é" * 50})

    async def empty(_: Request) -> Response:
        return Response(status_code=204)

    async def boom(_: Request) -> Response:
        raise RuntimeError("boom")

    async def stream(_: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[bytes]:
            for n in range(3):
                yield b"data: %d\n\n" % n

        return StreamingResponse(events(), media_type="text/event-stream")

    async def echo(request: Request) -> PlainTextResponse:
        return PlainTextResponse((await request.body()).decode())

    return Starlette(
        routes=[
            Route("/json", json, methods=["GET", "HEAD"]),
            Route("/empty", empty),
            Route("/boom", boom),
            Route("/stream", stream),
            Route("/echo", echo, methods=["POST"]),
        ]
    )


async def exchange(protocol_class: type[HttpToolsProtocol], request: bytes) -> SpyTransport:
    """Feed ``request`` to a protocol on the running loop; the writes once every task ended."""
    config = Config(app(), lifespan="off", log_level="critical")
    state = ServerState()
    state.default_headers = [(b"date", b"Thu, 01 Jan 1970 00:00:00 GMT"), (b"server", b"uvicorn")]
    protocol = protocol_class(config=config, server_state=state, app_state={})
    transport = SpyTransport()
    protocol.connection_made(transport)
    protocol.data_received(request)
    deadline = time.monotonic() + 5
    await asyncio.sleep(0)
    while state.tasks or protocol.pipeline:
        assert time.monotonic() < deadline, "the protocol did not answer"
        await asyncio.sleep(0.001)
    protocol.connection_lost(None)
    return transport


@pytest.mark.parametrize(
    ("request_bytes", "writes"),
    [
        (GET, 1),  # JSON: head and body together
        (b"HEAD /json HTTP/1.1\r\nhost: x\r\n\r\n", 1),  # the head alone, no body
        (b"GET /nope HTTP/1.1\r\nhost: x\r\n\r\n", 1),  # Starlette's 404
        (b"GET /empty HTTP/1.1\r\nhost: x\r\n\r\n", 1),  # 204, no Content-Length
        (b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello", 1),
        (b"GET /boom HTTP/1.1\r\nhost: x\r\n\r\n", 1),  # uvicorn's own 500
        (b"GET /json HTTP/1.0\r\n\r\n", 1),  # connection: close after the answer
        (GET + b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi" + GET, 3),
    ],
)
async def test_same_bytes_as_uvicorn_with_a_write_per_response(
    request_bytes: bytes, writes: int
) -> None:
    ours = await exchange(OneWriteHttpToolsProtocol, request_bytes)
    theirs = await exchange(HttpToolsProtocol, request_bytes)
    assert b"".join(ours.writes) == b"".join(theirs.writes)
    assert b"".join(ours.writes).startswith(b"HTTP/1.1 ")
    assert len([data for data in ours.writes if data]) == writes  # write(b"") sends nothing
    assert ours.closed == theirs.closed


async def test_a_stream_writes_its_head_then_each_chunk() -> None:
    request = b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n"
    ours = await exchange(OneWriteHttpToolsProtocol, request)
    theirs = await exchange(HttpToolsProtocol, request)
    assert ours.writes == theirs.writes
    assert ours.writes[0].endswith(b"transfer-encoding: chunked\r\n\r\n")
    assert ours.writes[1:] == [b"9\r\ndata: %d\n\n\r\n" % n for n in range(3)] + [b"0\r\n\r\n"]


async def test_the_cycles_are_one_write_cycles() -> None:
    """Fails loudly when a uvicorn upgrade stops building a plain cycle in on_headers_complete."""
    config = Config(app(), lifespan="off", log_level="critical")
    protocol = OneWriteHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
    protocol.connection_made(SpyTransport())
    protocol.data_received(GET)
    assert type(protocol.cycle) is OneWriteCycle
    while protocol.server_state.tasks:
        await asyncio.sleep(0.001)
    protocol.connection_lost(None)


def test_written_against_the_installed_uvicorn() -> None:
    """OneWriteCycle.send copies uvicorn's: check it against another version before moving."""
    assert uvicorn.__version__ == UVICORN


def test_make_server_uses_it_for_httptools() -> None:
    assert http_protocol("auto") is OneWriteHttpToolsProtocol
    assert http_protocol("httptools") is OneWriteHttpToolsProtocol
    assert http_protocol("httptools-uvicorn") == "httptools"
    assert http_protocol("h11") == "h11"


# -- over a real socket -------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(asgi: Any, http: str = "auto") -> AsyncIterator[tuple[str, int]]:
    sock = free_socket()
    server = make_server(asgi, "127.0.0.1", 0, http=http)  # type: ignore[arg-type]
    server.config.lifespan = "off"
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + 10
    while not server.started:
        assert not task.done() and time.monotonic() < deadline, "server did not start"
        await asyncio.sleep(0.005)
    try:
        host, port = sock.getsockname()[:2]
        yield host, port
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


async def read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


def without_date(response: bytes) -> bytes:
    return b"\r\n".join(line for line in response.split(b"\r\n") if not line.startswith(b"date:"))


async def test_over_loopback_the_same_answers_on_one_connection() -> None:
    answers: dict[str, list[bytes]] = {}
    for http in ("auto", "httptools-uvicorn"):
        async with serving(app(), http) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            got = []
            for request in (GET, b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi"):
                writer.write(request)
                got.append(without_date(await asyncio.wait_for(read_response(reader), 5)))
            answers[http] = got
            writer.close()
            await writer.wait_closed()
    assert answers["auto"] == answers["httptools-uvicorn"]
    assert answers["auto"][1].endswith(b"\r\n\r\nhi")


async def test_over_loopback_a_stream_is_flushed_per_event() -> None:
    """The head before the first event, each event before the next is made (SSE)."""
    steps = [asyncio.Event() for _ in range(3)]

    async def events(scope: Any, receive: Any, send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for n, step in enumerate(steps):
            await step.wait()
            await send(
                {"type": "http.response.body", "body": b"data: %d\n\n" % n, "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async with serving(events) as (host, port):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert b"transfer-encoding: chunked" in head
        for n, step in enumerate(steps):
            step.set()
            chunk = await asyncio.wait_for(reader.readuntil(b"\n\n\r\n"), 5)
            assert chunk == b"9\r\ndata: %d\n\n\r\n" % n
        assert await asyncio.wait_for(reader.readexactly(5), 5) == b"0\r\n\r\n"
        writer.close()
        await writer.wait_closed()
