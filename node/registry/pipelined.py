"""Fetch a batch of cards over HTTP/1.1 keep-alive with pipelining: a few system calls per
window of requests instead of several per card.

    left = await fetch_pipelined(fetcher, urls, stored, deliver)   # deliver(i, Fetched | error)

The bulk import's fast path (:func:`node.registry.bulk.prepare_all`). For each ``http`` origin
the name is resolved once and refused unless *every* address is one the SSRF guard allows (the
same rule as :class:`~node.registry.fetcher.CardFetcher`), and the connection goes to a checked
address. Each request in flight holds one of the fetcher's slots (per origin and in total), so
the per-host limit counts requests, not connections; a window of GETs is written at once and
the answers are parsed (``httptools``) from whatever each read brings. An answer has
``fetch_timeout_s`` from the write of its request; bodies are held to ``max_card_bytes``.

Anything this path does not handle itself — ``https``, a redirect, a compressed body, a body
without a length, a host that closes the connection or answers ``Connection: close``, a parse
error, a name that does not resolve or is refused — returns that URL's index in ``left``, for
the ordinary per-URL fetch (which reports the error as always). An origin that broke a pipeline
is not pipelined again (remembered for the fetcher's life, bounded).
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address

import httptools
from yarl import URL

from node.errors import RegistryError
from node.registry.errors import CardTooLarge, CardUnreachable
from node.registry.fetcher import _ETAG, _REDIRECTS, CardFetcher, Fetched, validator

Deliver = Callable[[int, Fetched | RegistryError], None]
CONNECTIONS_PER_ORIGIN = int(__import__("os").environ.get("H4_CONNS", "4"))
_NO_PIPELINE_MAX = 4096


@dataclass(slots=True)
class _Request:
    index: int
    etag: str | None
    wire: bytes
    sent_at: float = 0.0
    host: object = None  # the slot held (FetchSlots' _Host)


@dataclass(slots=True)
class _Origin:
    key: str  # scheme://host:port, as CardFetcher's slots name it
    host: str
    port: int
    authority: str
    todo: deque[_Request] = field(default_factory=deque)


async def fetch_pipelined(
    fetcher: CardFetcher, urls: Sequence[str], stored: Mapping[str, str | None], deliver: Deliver
) -> list[int]:
    """Fetch ``urls`` by origin over pipelined connections; ``deliver(i, result)`` is called
    as each answer is parsed. Returns the indexes left for the per-URL path (see module)."""
    left: list[int] = []
    origins: dict[str, _Origin] = {}
    for i, url in enumerate(urls):
        request = _request(i, url, stored.get(url), origins, fetcher)
        if request is None:
            left.append(i)
    runs = [_run_origin(fetcher, origin, deliver, left) for origin in origins.values()]
    await asyncio.gather(*runs)
    left.sort()
    return left


def _request(
    i: int,
    url: str,
    stored: str | None,
    origins: dict[str, _Origin],
    fetcher: CardFetcher,
) -> _Request | None:
    """Queue ``url`` on its origin, or ``None`` when this path does not take it."""
    target = URL(url)
    host, path = target.raw_host, target.raw_path_qs
    if target.scheme != "http" or not host or not (host + path).isascii() or "%" in host:
        return None
    if any(c in path for c in " \r\n\t") or target.port is None:
        return None
    key = f"http://{target.host_port_subcomponent}"
    if key in fetcher.no_pipeline:
        return None
    origin = origins.get(key)
    if origin is None:
        authority = target.host_port_subcomponent or host
        origin = origins[key] = _Origin(key, host.strip("[]"), target.port, authority)
    etag = stored if stored is not None and _ETAG.fullmatch(stored) else None
    head = b"GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n" % (
        path.encode(),
        origin.authority.encode(),
    )
    if etag is not None:
        head += b"If-None-Match: %s\r\n" % etag.encode()
    request = _Request(i, etag, head + b"\r\n")
    origin.todo.append(request)
    return request


async def _run_origin(
    fetcher: CardFetcher, origin: _Origin, deliver: Deliver, left: list[int]
) -> None:
    held = await fetcher.slots.acquire(origin.key, None)  # resolutions are bounded like fetches
    try:
        address = await _address(fetcher, origin.host, origin.port)
    finally:
        fetcher.slots.release(origin.key, held)
    if address is None:
        left.extend(r.index for r in origin.todo)
        return
    per_host = fetcher.slots.per_host
    while origin.todo:  # connections close when they find no free slot; then again
        before = len(origin.todo)
        conns = min(per_host, CONNECTIONS_PER_ORIGIN, before)
        window = max(1, per_host // conns)
        runs = [_Connection(fetcher, origin, address, window, deliver, left) for _ in range(conns)]
        await asyncio.gather(*(c.run() for c in runs))
        if len(origin.todo) >= before or not all(c.usable for c in runs):
            break  # no progress (not connected), or the origin broke the pipeline
    left.extend(r.index for r in origin.todo)  # for the per-URL path
    origin.todo.clear()


async def _address(fetcher: CardFetcher, host: str, port: int) -> str | None:
    """An address to connect to when every address of ``host`` is allowed, else ``None``."""
    try:
        literal = ip_address(host)
    except ValueError:
        pass
    else:
        return host if fetcher.guard.allows(literal) else None
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(fetcher.timeout_s):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError):
        return None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses or any("%" in a or not fetcher.guard.allows(ip_address(a)) for a in addresses):
        return None
    return addresses[0]


class _Connection(asyncio.Protocol):
    """One keep-alive connection to an origin, taking requests from the origin's queue."""

    def __init__(
        self,
        fetcher: CardFetcher,
        origin: _Origin,
        address: str,
        window: int,
        deliver: Deliver,
        left: list[int],
    ) -> None:
        self.fetcher, self.origin, self.address = fetcher, origin, address
        self.window, self.deliver, self.left = window, deliver, left
        self.inflight: deque[_Request] = deque()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[None] | None = None
        self.spare: object = None  # a slot held before any request takes it
        self.low = 0  # wake the sender when no more than this many are in flight
        self.closed = False
        self.usable = True  # False once the origin broke the pipeline
        self._reset()

    # -- the request side --------------------------------------------------------------------

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        # A slot before a connection (kept for the first request): connections stay bounded.
        self.spare = await self.fetcher.slots.acquire(self.origin.key, None)
        try:
            async with asyncio.timeout(self.fetcher.timeout_s):
                await loop.create_connection(lambda: self, self.address, self.origin.port)
            while not self.closed and (self.origin.todo or self.inflight):
                await self._send(loop)
                if not self.inflight:
                    break  # no free slot: an idle connection is not kept open
                await self._wait(loop)
        except (OSError, TimeoutError):
            pass  # not connected: the per-URL path reports what went wrong
        finally:
            self._give_up()
            if self.transport is not None:
                self.transport.close()
            if self.spare is not None:
                self.fetcher.slots.release(self.origin.key, self.spare)  # type: ignore[arg-type]
                self.spare = None

    async def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take slots for as many queued requests as fit the window and write them at once
        (only free slots: a connection waits for one only before it connects)."""
        slots, todo = self.fetcher.slots, self.origin.todo
        batch: list[_Request] = []
        while todo and len(self.inflight) + len(batch) < self.window:
            if self.spare is None and not slots.free(self.origin.key):
                break
            request = todo.popleft()
            if self.spare is not None:
                request.host, self.spare = self.spare, None
            else:  # free: taken at once
                request.host = await slots.acquire(self.origin.key, None)
            batch.append(request)
        if not batch or self.closed:
            for request in reversed(batch):
                self._release(request)
                todo.appendleft(request)
            return
        now = loop.time()
        for request in batch:
            request.sent_at = now
        self.inflight.extend(batch)
        self.fetcher.requests += len(batch)
        self.fetcher.conditional += sum(r.etag is not None for r in batch)
        assert self.transport is not None
        self.transport.write(b"".join(r.wire for r in batch))

    async def _wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until half the window is answered (or all, or the connection is gone); the first
        request in flight fails as unreachable when not answered within the timeout of its
        write (the rest are left to the per-URL path)."""
        if not self.inflight or self.closed:
            return
        self.low = len(self.inflight) // 2 if self.origin.todo else 0
        self.waiter = loop.create_future()
        deadline = self.inflight[0].sent_at + self.fetcher.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                await self.waiter
        except TimeoutError:
            # The answer the server owes first did not come: that card fails as a per-URL
            # fetch would; the ones queued behind it go to the per-URL path (not pipelined).
            self.closed, self.usable = True, False
            request = self.inflight.popleft()
            self._release(request)
            timeout_s = self.fetcher.timeout_s
            self.deliver(
                request.index,
                CardUnreachable(f"card URL unreachable: no card within {timeout_s:g} s"),
            )
        finally:
            self.waiter = None

    def _give_up(self) -> None:
        """Whatever is not answered goes to the per-URL path; so does the origin's queue when
        the origin broke the pipeline."""
        while self.inflight:
            request = self.inflight.popleft()
            self._release(request)
            self.left.append(request.index)
        if not self.usable:
            no_pipeline = self.fetcher.no_pipeline
            if len(no_pipeline) >= _NO_PIPELINE_MAX:
                no_pipeline.clear()
            no_pipeline.add(self.origin.key)
            while self.origin.todo:
                self.left.append(self.origin.todo.popleft().index)

    def _release(self, request: _Request) -> None:
        if request.host is not None:
            self.fetcher.slots.release(self.origin.key, request.host)  # type: ignore[arg-type]
            request.host = None

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _broken(self) -> None:
        """The origin did something this path does not follow: stop here."""
        self.usable = False
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._wake()

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.parser.feed_data(data)
        except _Stop:
            pass
        except httptools.HttpParserError:
            self._broken()
            return
        if len(self.inflight) <= self.low or self.closed:
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and self.inflight:
            self.usable = False  # closed with answers owed: no pipelining here
        self.closed = True
        self._wake()

    # -- httptools callbacks (raising _Stop ends the parse of this read) ---------------------

    def _reset(self) -> None:
        self.etag: bytes | None = None
        self.length: int | None = None
        self.chunked = False
        self.location = False
        self.encoded = False
        self.body: list[bytes] = []
        self.size = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"etag":
            self.etag = value
        elif name == b"content-length" and value.strip().isdigit():
            self.length = int(value)
        elif name == b"transfer-encoding":
            self.chunked = b"chunked" in value.lower()
        elif name == b"location":
            self.location = True
        elif name == b"content-encoding" and value.strip().lower() != b"identity":
            self.encoded = True

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200 or not self.inflight or self.closed:
            self._broken()  # a 1xx answer, or an answer to nothing asked
            raise _Stop
        if status in (204, 304) or self.length == 0:
            return
        if self.length is None and not self.chunked:
            self._broken()  # a body up to the close: the per-URL path reads it
            raise _Stop
        if self.length is not None and self.length > self.fetcher.max_bytes:
            self._too_large()

    def on_body(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.fetcher.max_bytes:
            self._too_large()
        self.body.append(data)

    def _too_large(self) -> None:
        request = self.inflight.popleft()
        self._release(request)
        max_bytes = self.fetcher.max_bytes
        self.deliver(request.index, CardTooLarge(f"card is larger than {max_bytes} bytes"))
        self.closed = True  # the rest of this body is not read: the connection goes
        if self.transport is not None:
            self.transport.close()
        self._wake()
        raise _Stop

    def on_message_complete(self) -> None:
        request = self.inflight.popleft()
        self._release(request)
        status = self.parser.get_status_code()
        if (status in _REDIRECTS and self.location) or self.encoded:
            self.left.append(request.index)
        elif status == 304 and request.etag:
            self.deliver(request.index, Fetched(None, request.etag))
        elif not 200 <= status < 300:
            self.deliver(request.index, CardUnreachable(f"card URL answered HTTP {status}"))
        else:
            body = b"".join(self.body)
            etag = None if self.etag is None else self.etag.decode("latin-1")
            self.deliver(request.index, Fetched(body, validator(body, etag)))
        self._reset()
        if not self.parser.should_keep_alive():
            self.usable = False
            self.closed = True
            self._wake()
            raise _Stop


class _Stop(Exception):
    """Ends the parse of the current read (raised from a parser callback)."""
