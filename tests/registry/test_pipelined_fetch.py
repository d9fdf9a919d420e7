"""The bulk import's pipelined card fetches (node/registry/pipelined.py) against a real loopback
HTTP/1.1 server that pipelines well, or closes mid-pipeline, answers ``Connection: close``,
sends an oversize or endless body, a body without a length, a redirect, or never answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from node.errors import RegistryError
from node.registry import RegistrySettings
from node.registry.bulk import Prepared, Unchanged, prepare_all
from node.registry.errors import CardTooLarge, CardUnreachable, UrlRefused
from node.registry.fetcher import CardFetcher
from node.tooling.guards.urls import UrlGuard
from tests.registry.conftest import LOOPBACK, _agent_card

_REQUEST = re.compile(rb"GET (\S+) HTTP/1\.1\r\n(.*?)\r\n\r\n", re.S)


def _card(name: str) -> bytes:
    return json.dumps(_agent_card(f"Agent {name}")).encode()


@dataclass
class Server:
    """Answers each request in order; what it does depends on the path's first segment."""

    max_bytes: int
    connections: int = 0
    shared: list[int] = field(default_factory=lambda: [0, 0])  # open now, most at once
    requests: int = 0
    most_unanswered: int = 0  # requests read but not answered yet, on one connection
    base_url: str = ""
    held: list[asyncio.Future[None]] = field(default_factory=list)

    def answer(self, path: str, headers: bytes) -> tuple[bytes, bool]:
        """(bytes to send, close after them)."""
        kind, _, name = path.strip("/").partition("/")
        body = _card(name)
        etag = f'"{name}"'.encode()
        if kind == "close-after":  # answers this one, then drops the connection
            return _ok(body, etag), True
        if kind == "conn-close":
            head = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n" % len(body)
            return head + b"\r\n" + body, True
        if kind == "big":
            return _ok(b" " * (self.max_bytes + 1), etag), False
        if kind == "big-chunked":
            chunk = b" " * 1000
            parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * (self.max_bytes // 1000 + 2)
            head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            return head + b"".join(parts) + b"0\r\n\r\n", False
        if kind == "no-length":
            return b"HTTP/1.1 200 OK\r\n\r\n" + body, True
        if kind == "redirect":
            return b"HTTP/1.1 302 Found\r\nLocation: /ok/%s\r\nContent-Length: 0\r\n\r\n" % (
                name.encode()
            ), False
        if kind == "missing":
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False
        if b"if-none-match: " + etag in headers.lower():
            return b"HTTP/1.1 304 Not Modified\r\nETag: %s\r\n\r\n" % etag, False
        return _ok(body, etag), False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.shared[0] += 1
        self.shared[1] = max(self.shared[1], self.shared[0])
        buffer = b""
        try:
            while data := await reader.read(65536):
                buffer += data
                requests = list(_REQUEST.finditer(buffer))
                buffer = buffer[requests[-1].end() :] if requests else buffer
                self.most_unanswered = max(self.most_unanswered, len(requests))
                for match in requests:
                    self.requests += 1
                    path = match.group(1).decode()
                    if path.startswith("/slow/"):
                        held = asyncio.get_running_loop().create_future()
                        self.held.append(held)
                        await held  # never set: the connection stalls here
                    out, close = self.answer(path, match.group(2))
                    writer.write(out)
                    if close:
                        await writer.drain()
                        return
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.shared[0] -= 1
            writer.close()


def _ok(body: bytes, etag: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nETag: %s\r\n" % etag + (
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


MAX_BYTES = 4000


@contextlib.asynccontextmanager
async def _serving(shared: list[int] | None = None) -> AsyncIterator[Server]:
    state = Server(MAX_BYTES) if shared is None else Server(MAX_BYTES, shared=shared)
    listener = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    state.base_url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        for held in state.held:
            held.cancel()
        listener.close()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with _serving() as state:
        yield state


def _fetcher(guard: UrlGuard | None = None, **settings: object) -> CardFetcher:
    merged = RegistrySettings(max_card_bytes=MAX_BYTES, **settings)  # type: ignore[arg-type]
    return CardFetcher(guard or UrlGuard(allow_cidrs=list(LOOPBACK)), merged)


async def _prepare(
    fetcher: CardFetcher, urls: list[str], stored: dict[str, str | None] | None = None
) -> list[Prepared | Unchanged | RegistryError]:
    try:
        return await prepare_all(fetcher, urls, stored or {}, wait_s=None)
    finally:
        await fetcher.aclose()


async def test_a_pipelining_host_serves_a_batch_over_few_connections(server: Server) -> None:
    urls = [f"{server.base_url}/ok/a{i}" for i in range(200)]
    fetcher = _fetcher(fetch_per_host=8)
    got = await _prepare(fetcher, urls)
    assert [g.info.name if isinstance(g, Prepared) else g for g in got] == [
        f"Agent a{i}" for i in range(200)
    ]
    assert [g.validator for g in got if isinstance(g, Prepared)][:2] == ['"a0"', '"a1"']
    assert fetcher.requests == server.requests == 200
    assert server.connections <= 4 and fetcher.no_pipeline == set()
    assert 1 < server.most_unanswered <= 8  # pipelined, within the per-host limit


async def test_unchanged_cards_are_asked_conditionally_and_not_parsed(server: Server) -> None:
    urls = [f"{server.base_url}/ok/u{i}" for i in range(20)]
    stored: dict[str, str | None] = {u: f'"u{i}"' for i, u in enumerate(urls)}
    stored[urls[0]] = '"old"'  # changed since: fetched whole
    fetcher = _fetcher()
    got = await _prepare(fetcher, urls, stored)
    assert isinstance(got[0], Prepared)
    assert all(isinstance(g, Unchanged) for g in got[1:])
    assert fetcher.conditional == 20


@pytest.mark.parametrize("kind", ["close-after", "conn-close", "no-length"])
async def test_a_host_that_does_not_keep_the_pipeline_still_gets_every_card_fetched(
    server: Server, kind: str
) -> None:
    urls = [f"{server.base_url}/{kind}/c{i}" for i in range(30)]
    fetcher = _fetcher()
    got = await _prepare(fetcher, urls)
    assert [g.info.name if isinstance(g, Prepared) else g for g in got] == [
        f"Agent c{i}" for i in range(30)
    ]
    assert fetcher.no_pipeline == {server.base_url}  # the rest went one by one


async def test_errors_belong_to_their_own_url_and_redirects_are_followed(server: Server) -> None:
    base = server.base_url
    urls = [
        f"{base}/ok/x1",
        f"{base}/big/x2",
        f"{base}/ok/x3",
        f"{base}/big-chunked/x4",
        f"{base}/missing/x5",
        f"{base}/redirect/x6",
        f"{base}/ok/x7",
    ]
    got = await _prepare(_fetcher(fetch_per_host=4), urls)
    assert isinstance(got[0], Prepared) and got[0].info.name == "Agent x1"
    assert isinstance(got[1], CardTooLarge) and isinstance(got[3], CardTooLarge)
    assert isinstance(got[4], CardUnreachable) and "HTTP 404" in str(got[4])
    assert isinstance(got[5], Prepared) and got[5].info.name == "Agent x6"
    assert [g.info.name for g in (got[2], got[6]) if isinstance(g, Prepared)] == [
        "Agent x3",
        "Agent x7",
    ]


async def test_a_host_that_stops_answering_costs_one_timeout_and_the_rest_still_come(
    server: Server,
) -> None:
    urls = [f"{server.base_url}/ok/s{i}" for i in range(10)]
    urls.insert(3, f"{server.base_url}/slow/s-held")
    fetcher = _fetcher(fetch_timeout_s=0.5, fetch_per_host=4)
    started = asyncio.get_running_loop().time()
    got = await _prepare(fetcher, urls)
    assert asyncio.get_running_loop().time() - started < 5
    assert isinstance(got[3], CardUnreachable) and "within 0.5 s" in str(got[3])
    rest = got[:3] + got[4:]
    assert [g.info.name if isinstance(g, Prepared) else g for g in rest] == [
        f"Agent s{i}" for i in range(10)
    ]


async def test_hosts_the_guard_refuses_are_not_contacted(server: Server) -> None:
    fetcher = _fetcher(UrlGuard())  # loopback not allowed
    got = await _prepare(fetcher, [f"{server.base_url}/ok/r1", "http://localhost:1/ok/r2"])
    assert all(isinstance(g, UrlRefused) for g in got), got
    assert server.connections == 0


async def test_connections_to_many_origins_stay_within_the_global_slots() -> None:
    shared = [0, 0]  # connections open at once over the three servers
    async with _serving(shared) as a, _serving(shared) as b, _serving(shared) as c:
        servers = (a, b, c)
        urls = [f"{s.base_url}/ok/g{i}" for i in range(20) for s in servers]
        fetcher = _fetcher(fetch_concurrency=2, fetch_per_host=2)
        got = await _prepare(fetcher, urls)
        assert all(isinstance(g, Prepared) for g in got)
        # 2 slots: 2 connections at once (3 while a closed one's close is still on its way)
        assert shared[1] <= 3
        assert all(s.most_unanswered <= 2 for s in servers)
