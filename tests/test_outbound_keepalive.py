"""``post_whole`` over a kept-alive connection ends every exchange as aiohttp's path ends it.

A raw asyncio server on loopback records the bytes of every request and plays a script per
connection (answer, close, stall, trickle…). Each case runs twice over the node's outbound
transport: once with ``sendable=True`` (the kept-alive connection of
:mod:`node.outbound_keepalive`) and once without (aiohttp). The requests on the wire must be
identical, and so must the outcome: the answer (status, reason, headers, body) or the httpx
error's type and message.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvloop

from node.outbound_http import OutboundTransport, outbound_client
from node.outbound_keepalive import Answer, sendable

BODY = b'{"jsonrpc":"2.0","method":"SendMessage","params":{},"id":"1"}'
Step = Callable[[asyncio.StreamWriter], Any]


def answer(body: bytes = b'{"ok":true}', status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}"
    return (head + f"content-length: {len(body)}\r\n\r\n").encode() + body


CHUNKED = (
    b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{"a"\r\n4\r\n:1}\n\r\n0\r\n\r\n'
)
UNTIL_CLOSE = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it"


@dataclass
class Script:
    """What the server does with each request (the last entry repeats), per connection."""

    steps: list[str]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                self.requests.append(head + await reader.readexactly(length))
                step = self.steps[min(len(self.requests) - 1, len(self.steps) - 1)]
                if step == "stall":  # until the client gives up and closes
                    await reader.read()
                    break
                if step == "hang up":
                    break
                if step == "half":
                    writer.write(answer(b"x" * 100)[:-50])
                    await writer.drain()
                    break
                if step == "half chunked":
                    writer.write(CHUNKED[:-10])
                    await writer.drain()
                    break
                if step == "trickle":  # each piece within the read timeout, the whole beyond it
                    for piece in (answer()[:20], answer()[20:40]):
                        writer.write(piece)
                        await writer.drain()
                        await asyncio.sleep(0.2)
                    writer.write(answer()[40:])
                    await writer.drain()
                    continue
                writer.write(STEPS[step])
                await writer.drain()
                if step in ("close after", "until close"):
                    break
        writer.close()


STEPS = {
    "ok": answer(),
    "503": answer(b"busy", "503 Service Unavailable"),
    "gzip": answer(gzip.compress(b'{"ok":1}'), extra="content-encoding: gzip\r\n"),
    "chunked": CHUNKED,
    "until close": UNTIL_CLOSE,
    "close after": answer(extra="connection: close\r\n"),
    "empty reason": b"HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\n{}",
}


@contextlib.asynccontextmanager
async def serving(script: Script) -> AsyncIterator[str]:
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/rpc?x=1"
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 1)


def _headers(http: httpx.AsyncClient, url: str) -> list[tuple[str, str]]:
    built = http.build_request("POST", url, content=BODY, headers={"A2A-Version": "1.0"})
    return [(k, v) for k, v in built.headers.multi_items() if k != "content-type"] + [
        ("content-type", "application/json")
    ]


async def outcomes(steps: list[str], calls: int, timeout_s: float = 1.0) -> list[Any]:
    """Both paths' outcomes and requests for ``calls`` posts against the scripted server."""
    results: list[Any] = []
    for plain in (True, False):
        script = Script(steps)
        got: list[Any] = []
        async with serving(script) as url, outbound_client(timeout=5.0) as http:
            transport = http._transport_for_url(httpx.URL(url))
            assert isinstance(transport, OutboundTransport)
            headers = _headers(http, url)
            assert sendable(headers)
            for _ in range(calls):
                opened = 0 if transport._keepalive is None else len(transport._keepalive._open)
                try:
                    got.append(
                        await transport.post_whole(url, headers, BODY, timeout_s, sendable=plain)
                    )
                except httpx.TransportError as exc:
                    got.append((type(exc), str(exc)))
                if plain and not opened:  # it went over a connection of the pool, not aiohttp's
                    assert transport._keepalive is not None and script.connections >= 1
                    assert transport.client is None or not transport.client.connector._conns
        port = url.split(":")[2].split("/")[0].encode()  # each path has its own server
        results.append((got, [r.replace(port, b"PORT") for r in script.requests]))
    return results


def _plain(outcome: Any) -> Any:
    if isinstance(outcome, Answer):
        headers = tuple((k.lower(), v) for k, v in outcome.raw_headers)
        return (outcome.status, outcome.reason, headers, outcome.body)
    return outcome


CASES = {
    "answer, reused": (["ok"], 3),
    "503": (["503"], 1),
    "gzip, kept raw": (["gzip"], 1),
    "chunked": (["chunked", "ok"], 2),
    "until close": (["until close", "ok"], 2),
    "connection close": (["close after", "ok"], 2),
    "empty reason": (["empty reason"], 1),
    "hang up, then again": (["hang up", "ok"], 2),
    "half an answer": (["half"], 1),
    "half a chunked answer": (["half chunked"], 1),
    "no answer in time": (["stall"], 1),
    "trickling answer": (["trickle"], 1),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_every_exchange_ends_as_through_aiohttp(case: str) -> None:
    steps, calls = CASES[case]
    (kept, kept_wire), (aio, aio_wire) = await outcomes(steps, calls, timeout_s=0.3)
    assert [_plain(o) for o in kept] == [_plain(o) for o in aio]
    assert kept_wire == aio_wire and len(kept_wire) >= 1


@pytest.mark.parametrize("case", ["answer, reused", "until close", "hang up, then again"])
def test_the_same_over_uvloop(case: str) -> None:
    """Nodes serve on uvloop, whose transports are not asyncio's classes."""
    steps, calls = CASES[case]
    (kept, kept_wire), (aio, aio_wire) = uvloop.run(outcomes(steps, calls))
    assert [_plain(o) for o in kept] == [_plain(o) for o in aio]
    assert kept_wire == aio_wire and len(kept_wire) == calls


async def test_a_kept_connection_is_reused_and_a_closed_one_is_not() -> None:
    script = Script(["ok"])
    async with serving(script) as url, outbound_client(timeout=5.0) as http:
        transport = http._transport_for_url(httpx.URL(url))
        assert isinstance(transport, OutboundTransport)
        headers = _headers(http, url)
        for _ in range(3):
            got = await transport.post_whole(url, headers, BODY, 1.0, sendable=True)
            assert got.status == 200 and got.body == b'{"ok":true}'
        assert script.connections == 1 and len(script.requests) == 3
        pool = transport._keepalive
        assert pool is not None
        for connection in list(pool._open):
            assert connection.transport is not None
            connection.transport.abort()  # as if the server had closed it while idle
        got = await transport.post_whole(url, headers, BODY, 1.0, sendable=True)
        assert got.status == 200 and script.connections == 2


async def test_a_refused_connection_fails_in_aiohttps_words() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    url = f"http://127.0.0.1:{port}/"
    errors = []
    async with outbound_client(timeout=5.0) as http:
        transport = http._transport_for_url(httpx.URL(url))
        assert isinstance(transport, OutboundTransport)
        for plain in (True, False):
            with pytest.raises(httpx.ConnectError) as caught:
                await transport.post_whole(url, _headers(http, url), BODY, 1.0, sendable=plain)
            errors.append(str(caught.value))
    assert errors[0] == errors[1]


def test_only_headers_aiohttp_sends_unchanged_are_sendable() -> None:
    full = [
        ("host", "a:1"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip"),
        ("user-agent", "x"),
        ("content-length", "2"),
        ("content-type", "application/json"),
    ]
    assert sendable(full)
    for i in range(len(full)):
        assert not sendable(full[:i] + full[i + 1 :])  # aiohttp would add that one
    assert not sendable([*full, ("transfer-encoding", "chunked")])
    assert not sendable([*full, ("x-token", "a\r\nEvil: 1")])
