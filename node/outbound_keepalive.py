"""A POST over a kept-alive plain-HTTP connection: aiohttp's bytes and outcomes, fewer layers.

A coordinator's peer hop is one small JSON-RPC POST and one small answer. Through aiohttp that
cost ~210 µs of client CPU per POST in a tight loopback loop (its request and response objects,
payload writer, stream reader, timers) against ~50 µs for a protocol that writes the request in
one ``write`` and parses the answer with ``httptools`` as it arrives; in a coordinator, ~0.3–1 ms
of CPU per hop (``bench/RESULTS.md``, issue 13).
:class:`KeepAlivePool` is that protocol with aiohttp's behaviour where a caller can see it:

- the request on the wire is aiohttp's for the same headers: ``POST <path> HTTP/1.1``, ``Host``
  first (aiohttp's order), the caller's headers in order; only requests that already carry
  every header aiohttp would add (:func:`sendable`) go this way;
- connections are reused while the server keeps them alive, for at most ``keepalive_s`` idle,
  and a pooled connection the server has closed is dropped before it is reused (as
  :class:`~node.outbound_http.OutboundTransport`'s connector checks);
- the answer's wait is bounded as aiohttp's ``sock_read`` bounds it (the time between reads);
  a server that hangs up before the whole answer, or a wait that runs out, raise the aiohttp
  errors aiohttp raises there (``ServerDisconnectedError``, ``SocketTimeoutError``), which the
  caller maps to httpx's as before;
- a connection is opened only when none is idle and fewer than ``limit`` are open; when the
  connect fails or the limit is reached, :meth:`KeepAlivePool.post` returns None *before
  anything was sent* and the caller sends through aiohttp (which then connects, waits or fails
  with its own errors, word for word).

Bodies are read whole (``Content-Length``, chunked or up to the close), not decoded
(``Content-Encoding`` is the caller's, as with ``auto_decompress=False``).
"""

from __future__ import annotations

import asyncio
import functools
import select
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import aiohttp
import httptools
from aiohttp.http_exceptions import ContentLengthError, TransferEncodingError
from yarl import URL

__all__ = ["Answer", "KeepAlivePool", "sendable"]

_NEEDED = frozenset(
    {"host", "accept", "accept-encoding", "user-agent", "content-length", "content-type"}
)


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole HTTP answer: status, reason, the headers as received, the body as sent."""

    status: int
    reason: str
    raw_headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: str, default: str) -> str:
        """The first header called ``name`` (lower case), decoded as aiohttp decodes it."""
        wanted = name.encode()
        for key, value in self.raw_headers:
            if key.lower() == wanted:
                return value.decode("utf-8", "surrogateescape")
        return default


def sendable(headers: Sequence[tuple[str, str]]) -> bool:
    """True when aiohttp would send exactly ``headers``: it adds none of its own, and none holds a
    line break (aiohttp refuses those with its own error)."""
    names = {name.lower() for name, _ in headers}
    if not names >= _NEEDED or "transfer-encoding" in names:
        return False
    return not any(c in text for pair in headers for text in pair for c in "\r\n")


@functools.lru_cache(maxsize=256)
def _target(url: str) -> tuple[str, int, str, str] | None:
    """(host, port, request path, Host value) of a plain ``http`` URL, or None."""
    parsed = URL(url)
    if parsed.scheme != "http" or not parsed.raw_host or parsed.port is None:
        return None
    host_port = parsed.host_port_subcomponent
    assert host_port is not None
    return parsed.raw_host, parsed.port, parsed.raw_path_qs, host_port


class _Connection(asyncio.Protocol):
    """One kept-alive connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self, pool: KeepAlivePool, key: tuple[str, int]) -> None:
        self._pool, self.key = pool, key
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Answer] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timeout_s = 0.0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._complete = False
        self._keep = False
        self._until_close = False  # the answer's body ends when the server closes
        self._headers_done = self._chunked = False
        self._expected: int | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._complete:  # nothing asked: the connection is unusable
            self._close()
            return
        self._arm()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(aiohttp.ClientResponseError(None, (), message=f"bad answer: {exc}"))  # type: ignore[arg-type]
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool._forget(self)
        if self._waiter is not None and not self._waiter.done():
            if self._until_close:  # a body delimited by the close is complete now
                self.on_message_complete()
            elif self._headers_done:  # cut short: aiohttp's words for it
                self._fail(aiohttp.ClientPayloadError(self._cut_short(exc)))
            if not self._complete:
                self._fail(aiohttp.ServerDisconnectedError())

    # -- httptools callbacks ------------------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._headers_done = True
        lengths = [v for k, v in self._headers if k.lower() == b"content-length"]
        self._expected = int(lengths[0]) if lengths else None
        self._chunked = any(k.lower() == b"transfer-encoding" for k, _ in self._headers)
        self._until_close = self._expected is None and not self._chunked

    def _cut_short(self, exc: Exception | None) -> str:
        """aiohttp's message for an answer whose body the server's close cut short."""
        received = sum(len(piece) for piece in self._body)
        underlying = (
            TransferEncodingError("Not enough data to satisfy transfer length header.")
            if self._chunked
            else ContentLengthError(
                "Not enough data to satisfy content length header "
                f"(received {received} of {self._expected} bytes)."
            )
        )
        message = f"Response payload is not completed: {underlying!r}"
        return message if exc is None else f"{message!s}. {exc!r}"

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._complete = True
        self._keep = self._parser.should_keep_alive() and not self._until_close
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            answer = Answer(
                self._parser.get_status_code(),
                self._reason.decode("utf-8", "surrogateescape"),
                tuple(self._headers),
                b"".join(self._body),
            )
            waiter.set_result(answer)

    # -- one request --------------------------------------------------------------------------

    async def post(self, head: bytes, body: bytes, timeout_s: float) -> Answer:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        self._reason, self._headers, self._body = b"", [], []
        self._complete = self._keep = self._until_close = False
        self._headers_done = self._chunked = False
        self._timeout_s = timeout_s
        self.transport.write(head + body)
        self._arm()
        try:
            answer: Answer = await waiter
        except BaseException:
            self._close()  # cancelled or failed mid-answer: the connection's state is unknown
            raise
        finally:
            self._waiter = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if self._keep and not self.closed:
            self._pool._release(self)
        else:
            self._close()
        return answer

    def _arm(self) -> None:
        """(Re)start the wait for the next read, as aiohttp's ``sock_read`` timeout does."""
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._timeout_s, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self._fail(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
        self._close()

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def _close(self) -> None:
        self.closed = True
        self._pool._forget(self)
        if self.transport is not None:
            self.transport.close()

    def usable(self) -> bool:
        """Open, and nothing to read while idle (the server did not close it meanwhile)."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        sock = transport.get_extra_info("socket")
        if sock is not None:
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            if poller.poll(0):
                return False
        return True


class KeepAlivePool:
    """Kept-alive plain-HTTP connections per host and port (module doc)."""

    def __init__(self, *, limit: int, keepalive_s: float) -> None:
        self._limit, self._keepalive_s = limit, keepalive_s
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._closed = False

    async def post(
        self, url: str, headers: Sequence[tuple[str, str]], body: bytes, timeout_s: float
    ) -> Answer | None:
        """POST ``body``; the answer, aiohttp's errors, or None when nothing was sent (module doc).

        ``headers`` must be :func:`sendable`; ``url`` is sent only when it is plain ``http``.
        """
        target = _target(url)
        if target is None or self._closed:
            return None
        host, port, path, host_port = target
        connection = self._take((host, port))
        if connection is None:
            if len(self._open) >= self._limit:
                return None
            connection = await self._connect(host, port, timeout_s)
            if connection is None:
                return None
        lines = [f"POST {path} HTTP/1.1\r\nHost: {host_port}\r\n"]
        for name, value in headers:
            if name.lower() == "host":  # aiohttp's Host stays first, with the caller's value
                lines[0] = f"POST {path} HTTP/1.1\r\n{name}: {value}\r\n"
            else:
                lines.append(f"{name}: {value}\r\n")
        lines.append("\r\n")
        return await connection.post("".join(lines).encode("utf-8"), body, timeout_s)

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if now - connection.idle_since <= self._keepalive_s and connection.usable():
                return connection
            connection._close()
        return None

    async def _connect(self, host: str, port: int, timeout_s: float) -> _Connection | None:
        loop = asyncio.get_running_loop()
        connection = _Connection(self, (host, port))
        self._open.add(connection)
        try:
            async with asyncio.timeout(timeout_s):
                await loop.create_connection(lambda: connection, host, port)
        except (OSError, TimeoutError):
            self._forget(connection)  # aiohttp connects again and fails in its own words
            return None
        except BaseException:
            connection._close()
            raise
        return connection

    def _release(self, connection: _Connection) -> None:
        if self._closed:
            connection._close()
            return
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.key, deque()).append(connection)

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.key)
        if idle and connection in idle:
            idle.remove(connection)

    def close(self) -> None:
        """Close every connection (the transport is closing)."""
        self._closed = True
        for connection in list(self._open):
            connection._close()
        self._idle.clear()
