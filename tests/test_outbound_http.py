"""The outbound client (httpx over aiohttp): httpx's errors for each failure, bounded timeouts,
stale pooled connections dropped. (The URL guard over it: tests/tooling/guards.)

Servers are real sockets on 127.0.0.1: asyncio servers in the test's loop that misbehave on
purpose, and a thread for the one test that must keep the client's loop from running.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from node.client import skill_message
from node.errors import PeerError
from node.outbound_http import outbound_client
from node.peers.peer_client import PeerClient, is_transient
from tests.peers.peers_support import peer_card
from tests.servers import free_socket, url_of

pytestmark = pytest.mark.network

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
CLIENTS = {"httpx": httpx.AsyncClient, "aiohttp": outbound_client}
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


@contextlib.asynccontextmanager
async def raw_server(handle: Handler) -> AsyncIterator[str]:
    """An HTTP server on loopback that answers with whatever ``handle`` writes."""
    handlers: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handle(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await reader.read()  # until the client gives up and closes
    writer.close()


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_refused_connection_is_a_connect_error_as_over_httpx(kind: str) -> None:
    sock = free_socket()  # bound, never listening
    async with CLIENTS[kind](timeout=5.0) as http:
        with pytest.raises(httpx.ConnectError) as info:
            await http.get(url_of(sock))
    assert is_transient(info.value)
    sock.close()


@pytest.mark.parametrize("kind", CLIENTS)
async def test_an_unreachable_peer_is_the_same_tool_error_as_over_httpx(kind: str) -> None:
    sock = free_socket()
    async with CLIENTS[kind](timeout=5.0) as http:
        card = peer_card(url_of(sock))
        client = PeerClient("b", card, http=http, retries=2, backoff_initial_s=0.01)
        message = skill_message("add", {"a": 1, "b": 2})
        with pytest.raises(PeerError) as info:
            await client.call(message, deadline=time.time() + 5)
    assert str(info.value).startswith("peer b unreachable: Network communication error: ")
    assert isinstance(info.value.__cause__.__cause__, httpx.ConnectError)  # type: ignore[union-attr]
    sock.close()


async def test_a_silent_server_is_a_read_timeout_within_the_bound() -> None:
    async with raw_server(never_answers) as url, outbound_client(timeout=0.2) as http:
        start = time.monotonic()
        with pytest.raises(httpx.ReadTimeout) as info:
            await http.get(url)
        assert time.monotonic() - start < 2.0
    assert is_transient(info.value)


async def test_waiting_for_a_pooled_connection_is_bounded_by_the_pool_timeout() -> None:
    arrived = asyncio.Event()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        arrived.set()
        await never_answers(reader, writer)

    limits = httpx.Limits(max_connections=1)
    async with raw_server(hold) as url, outbound_client(timeout=5.0, limits=limits) as http:
        first = asyncio.create_task(http.get(url))
        await asyncio.wait_for(arrived.wait(), timeout=5.0)  # it holds the only connection
        start = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            await http.get(url, timeout=httpx.Timeout(5.0, pool=0.2))
        assert time.monotonic() - start < 2.0
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first


async def test_a_server_hanging_up_before_answering_is_a_remote_protocol_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async with raw_server(hang_up) as url, outbound_client(timeout=5.0) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(url, json={"x": 1})


async def test_a_body_cut_short_is_a_remote_protocol_error() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
        await writer.drain()
        writer.close()

    async with raw_server(cut) as url, outbound_client(timeout=5.0) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(url)


async def test_a_pooled_connection_the_server_closed_is_not_reused() -> None:
    """The server answers once per connection and closes it at once, without saying so.

    The client's loop is kept from running while the server closes (a blocking wait, as a loop
    busy with other requests would be), so aiohttp has not yet seen the connection end.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    closed = threading.Event()
    connections: list[int] = []

    def serve() -> None:
        for n in range(2):
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(OK)
                connections.append(n)
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    async with outbound_client(timeout=5.0) as http:
        assert (await http.get(url)).text == "ok"
        assert closed.wait(timeout=5.0)  # blocks the loop: the FIN is not read by aiohttp
        # A POST: aiohttp itself would re-send an idempotent request failed on a reused one.
        assert (await http.post(url, json={})).text == "ok"  # a new connection
    thread.join(timeout=5.0)
    listener.close()
    assert connections == [0, 1]
