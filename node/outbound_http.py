"""The node's outbound HTTP client: httpx's API over aiohttp's connection pool.

    async with outbound_client(timeout=httpx.Timeout(30.0, connect=5.0)) as http:
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)

The official a2a-sdk client takes an ``httpx.AsyncClient``; httpcore's pool costs O(requests in
flight) per request, which made it the client's bottleneck with many calls at once (issue 13:
~70% of the client's CPU at 1,000 tasks in flight). ``httpx-aiohttp`` keeps httpx's client (auth,
headers, event hooks, env proxies, timeouts) and hands the wire to aiohttp. On top of it:

- aiohttp errors become the httpx errors httpx itself raises for the same failure (refused
  connection → ``ConnectError``, not the library's ``ConnectTimeout``; a server that hangs up →
  ``RemoteProtocolError``; nothing aiohttp raises leaks), so the SDK's and the node's handlers
  read them as before;
- a pooled connection the server has already closed is dropped before it is reused (httpcore
  checks the same), instead of failing the request sent on it;
- no cookies kept (neither aiohttp's jar nor httpx's: the client is shared by every caller);
- a response body of at most ``EAGER_BODY`` declared bytes is read in one go.

Timeouts map as the library does: httpx ``connect`` → aiohttp ``sock_connect``, ``read`` →
``sock_read``, ``pool`` → ``connect`` (waiting for a pooled connection, then connecting). The
``sni_hostname`` extension (:class:`~node.tooling.guards.urls.UrlGuard` connects to the checked
IP and names the host for TLS) becomes aiohttp's ``server_hostname``.
"""

from __future__ import annotations

import functools
import select
import ssl
import weakref
from collections.abc import AsyncIterator
from http.cookiejar import Cookie, CookieJar
from typing import Any

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler
from httpx_aiohttp import AiohttpTransport, HttpxAiohttpClient
from httpx_aiohttp.transport import AiohttpResponseStream

from node.outbound_keepalive import Answer, KeepAlivePool

__all__ = ["LIMITS", "Answer", "OutboundTransport", "as_httpx_response", "outbound_client"]

# First match wins: most specific first. Each maps to what httpx raises for the same failure.
ERROR_MAP: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (TimeoutError, httpx.ReadTimeout),
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ClientHttpProxyError, httpx.ProxyError),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientResponseError, httpx.RemoteProtocolError),
    (aiohttp.NonHttpUrlClientError, httpx.UnsupportedProtocol),
    (aiohttp.InvalidURL, httpx.UnsupportedProtocol),
    (aiohttp.ClientOSError, httpx.NetworkError),
    (aiohttp.ClientConnectionError, httpx.NetworkError),
    (aiohttp.ClientError, httpx.TransportError),
)
_FOREIGN = (aiohttp.ClientError, TimeoutError)
_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's default
# Idle connections are let go after 4 s: before the server does (uvicorn, so every node, closes
# at 5 s), so a request is not sent on a connection the server is closing at that moment.
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=4.0)
EAGER_BODY = 256 * 1024  # a response declaring at most this many bytes is read in one go


def httpx_error(exc: BaseException, request: httpx.Request) -> httpx.TransportError:
    """The httpx error for an aiohttp failure (``exc``) while sending ``request``."""
    for foreign, ours in ERROR_MAP:
        if isinstance(exc, foreign):
            return ours(str(exc) or type(exc).__name__, request=request)
    return httpx.TransportError(str(exc) or type(exc).__name__, request=request)


def _aiohttp_cause(exc: BaseException) -> BaseException:
    """The aiohttp error behind one the library mapped, or ``exc`` itself."""
    cause = exc.__cause__
    return cause if isinstance(exc, httpx.TransportError) and isinstance(cause, _FOREIGN) else exc


class _MappedStream(httpx.AsyncByteStream):
    """A response body whose read errors are mapped like the request's."""

    def __init__(self, inner: httpx.AsyncByteStream, request: httpx.Request) -> None:
        self._inner, self._request = inner, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (httpx.TransportError, *_FOREIGN) as exc:
            cause = _aiohttp_cause(exc)
            raise httpx_error(cause, self._request) from cause

    async def aclose(self) -> None:
        await self._inner.aclose()


def _readable(transport: Any) -> bool:
    """True when an idle connection's socket has something to read: the server closed it."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None or not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class _CheckedConnector(aiohttp.TCPConnector):
    """Drops a pooled connection whose server hung up before it is reused.

    aiohttp knows a connection is closed only once its loop has read the FIN; a busy loop may
    hand out a keep-alive connection the server closed seconds ago (uvicorn closes after 5 s
    idle), and the request sent on it fails. A connection is checked when handed out again.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._used: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()

    async def connect(
        self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout
    ) -> aiohttp.connector.Connection:
        while True:
            conn = await super().connect(req, traces, timeout)
            proto = conn.protocol
            if proto is None or proto not in self._used:
                if proto is not None:
                    self._used.add(proto)
                return conn
            if not _readable(conn.transport):
                return conn
            conn.close()  # closed by the server: forget it and take another


class OutboundTransport(AiohttpTransport):
    """``httpx_aiohttp.AiohttpTransport`` with httpx's errors, checked reuse and no cookie jar."""

    _keepalive: KeepAlivePool | None = None  # post_whole's kept-alive connections, once used

    def get_client(self) -> aiohttp.ClientSession:
        limit = self.limits.max_connections
        connector = _CheckedConnector(
            limit=limit if limit is not None else 0,
            keepalive_timeout=self.limits.keepalive_expiry,
            ssl=self.ssl_context,
            local_addr=(self.local_address, 0) if self.local_address else None,
        )
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` over aiohttp; a small body (declared length) is read at once.

        The library's own version (which this replaces) hands httpx aiohttp's headers as a
        mapping read key by key and streams every body through three async iterators; a call
        answered with a few kB of JSON spent more CPU in those layers than on the wire.
        """
        data: bytes | httpx.AsyncByteStream | None
        try:
            data = request.content or None
        except httpx.RequestNotRead:
            data = request.stream  # type: ignore[assignment]
            request.headers.pop("transfer-encoding", None)  # aiohttp chunks it itself
        try:
            response = await self._send(
                request.method,
                str(request.url),
                request.headers.multi_items(),
                data,
                request.extensions.get("timeout", {}),
                request.extensions.get("sni_hostname"),
            )
            stream: httpx.AsyncByteStream
            length = response.content_length
            if length is not None and length <= EAGER_BODY:
                stream = httpx.ByteStream(await response.read())
                response.release()
            else:
                stream = _MappedStream(AiohttpResponseStream(response), request)
        except _FOREIGN as exc:
            raise httpx_error(exc, request) from exc
        return _response(response, stream, request)

    async def post_whole(
        self,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes,
        timeout_s: float,
        *,
        sendable: bool = False,
    ) -> Answer:
        """POST ``body`` with exactly these headers (httpx's, as :meth:`handle_async_request` sends
        them) and read the whole answer: the same bytes on the wire, without httpx's request
        and response objects (a peer's JSON-RPC hop, :mod:`node.peers.jsonrpc_direct`).

        With ``sendable`` (the caller checked :func:`~node.outbound_keepalive.sendable`) a plain
        ``http`` URL goes over a kept-alive connection of :mod:`node.outbound_keepalive` (no
        proxy, no local address); anything else, or nothing sent there, through aiohttp.
        ``timeout_s`` is httpx's ``Timeout(timeout_s)``; aiohttp's errors become httpx's.
        """
        timeout = dict.fromkeys(("connect", "read", "write", "pool"), timeout_s)
        try:
            if sendable and self.proxy is None and not self.local_address and not self.uds:
                if self._keepalive is None:
                    limit = self.limits.max_connections
                    self._keepalive = KeepAlivePool(
                        limit=limit if limit is not None else 100,
                        keepalive_s=self.limits.keepalive_expiry or 0.0,
                    )
                answer = await self._keepalive.post(url, headers, body, timeout_s)
                if answer is not None:
                    return answer
            response = await self._send("POST", url, headers, body, timeout, None)
            try:
                content = await response.read()
            finally:
                response.release()
            return Answer(response.status, response.reason or "", response.raw_headers, content)
        except _FOREIGN as exc:
            request = httpx.Request("POST", url, headers=headers, content=body)
            raise httpx_error(exc, request) from exc

    async def aclose(self) -> None:
        if self._keepalive is not None:
            self._keepalive.close()
        await super().aclose()

    async def _send(
        self,
        method: str,
        url: str,
        headers: list[tuple[str, str]],
        data: Any,
        timeout: dict[str, Any],
        sni_hostname: str | None,
    ) -> aiohttp.ClientResponse:
        if not isinstance(self.client, aiohttp.ClientSession):
            self.client = self.get_client()
        proxy = self.proxy
        return await self.client.request(
            method,
            url,
            headers=headers,
            data=data,
            allow_redirects=False,
            auto_decompress=False,  # httpx decodes, as with its own transport
            compress=False,
            timeout=aiohttp.ClientTimeout(
                sock_connect=timeout.get("connect"),
                sock_read=timeout.get("read"),
                connect=timeout.get("pool"),
            ),
            server_hostname=sni_hostname,
            proxy=str(proxy.url) if proxy else None,
            proxy_auth=aiohttp.BasicAuth(*proxy.auth) if proxy and proxy.auth else None,
            proxy_headers=proxy.headers if proxy else None,
        )


def _response(
    response: aiohttp.ClientResponse | Answer,
    stream: httpx.AsyncByteStream,
    request: httpx.Request,
) -> httpx.Response:
    """The httpx response for aiohttp's ``response`` (its body in ``stream``)."""
    extensions = {"http_version": b"HTTP/1.1"}
    if response.reason:
        extensions["reason_phrase"] = response.reason.encode()
    return httpx.Response(
        status_code=response.status,
        headers=response.raw_headers,
        stream=stream,
        request=request,
        extensions=extensions,
    )


def as_httpx_response(answer: Answer, request: httpx.Request) -> httpx.Response:
    """What :meth:`OutboundTransport.handle_async_request` returns for an answer read whole."""
    return _response(answer, httpx.ByteStream(answer.body), request)


class _NoJar(CookieJar):
    """A cookie jar that keeps nothing."""

    def set_cookie(self, cookie: Cookie) -> None:
        return None

    def extract_cookies(self, response: Any, request: Any) -> None:
        return None


class _NoCookies(httpx.Cookies):
    """httpx's cookies, none kept: ``extract_cookies`` skips its per-response parsing too."""

    def __init__(self) -> None:
        super().__init__(_NoJar())

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


_NO_COOKIES = _NoCookies()


@functools.lru_cache(maxsize=512)
def _parsed(url: str) -> httpx.URL:
    """``httpx.URL(url)``, remembered: parsing costs ~30 µs and a URL is immutable."""
    return httpx.URL(url)


class _OutboundClient(HttpxAiohttpClient):
    """``HttpxAiohttpClient`` building :class:`OutboundTransport` (also behind env proxies).

    It keeps no cookies: the client is shared by every call of the node (peers, the registry,
    every user's ``http_fetch``), so a cookie one site set for one caller would go back to that
    site on another caller's request (and httpx parsed every answer's headers for cookies).
    """

    @property
    def cookies(self) -> httpx.Cookies:
        return _NO_COOKIES

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        if cookies:
            raise ValueError("the node's outbound client keeps no cookies")

    def _merge_url(self, url: httpx.URL | str) -> httpx.URL:
        """httpx's, with absolute URL strings parsed once (a peer's URL is sent again and again)."""
        if isinstance(url, str):
            parsed = _parsed(url)
            if parsed.is_absolute_url:
                return parsed
        return super()._merge_url(url)

    def _init_transport(
        self,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        **kwargs: Any,
    ) -> httpx.AsyncBaseTransport:
        if transport is not None:
            return transport
        return OutboundTransport(verify=verify, cert=cert, trust_env=trust_env, limits=limits)

    def _init_proxy_transport(
        self,
        proxy: httpx.Proxy,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx.Limits = _LIMITS,
        **kwargs: Any,
    ) -> httpx.AsyncBaseTransport:
        return OutboundTransport(
            verify=verify, cert=cert, trust_env=trust_env, limits=limits, proxy=proxy
        )


def outbound_client(
    *, timeout: httpx.Timeout | float, follow_redirects: bool = False, **kwargs: Any
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` sending over aiohttp; ``kwargs`` as for ``httpx.AsyncClient``.

    ``timeout`` is required: every outbound call is bounded. ``limits`` default to
    :data:`LIMITS`.
    """
    kwargs.setdefault("limits", LIMITS)
    return _OutboundClient(timeout=timeout, follow_redirects=follow_redirects, **kwargs)
