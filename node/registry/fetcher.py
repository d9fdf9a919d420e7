"""Fetch agent cards: through the SSRF guard's rules, bounded, over pooled keep-alive connections.

    fetcher = CardFetcher(guard, settings)
    fetched = await fetcher.fetch(url, stored='"v1"', wait_s=2.0)   # Fetched(body=None) on 304
    await fetcher.aclose()

Every fetch first takes a slot: one of ``fetch_per_host`` for its origin (scheme, host, port),
then one of ``fetch_concurrency`` for the registry. A fetch that gets no slot within ``wait_s``
raises :class:`HostBusy` (429) or :class:`Busy` (503), both with ``Retry-After``: nothing queues
without bound. The HTTP client is aiohttp (several times cheaper per request than httpx, which
bounded the fill rate): its resolver refuses a name when any address it resolves to is one the
:class:`UrlGuard` refuses, IP-literal hosts are checked before connecting, and the connection is
made to the address checked (aiohttp's DNS cache holds only checked answers). Redirects are
followed by hand, each hop checked the same way. Bodies are read up to ``max_card_bytes``
(after decompression); cookies are never kept.

A fetch may carry the card's stored *validator* (:func:`validator`): a server ETag is sent as
``If-None-Match`` and a 304 answer is ``Fetched(body=None)``; a ``sha256:`` validator (the
server sent no ETag) is compared with the body's hash by :meth:`Fetched.unchanged`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import socket
from dataclasses import dataclass
from ipaddress import ip_address

import aiohttp
from aiohttp.abc import ResolveResult
from aiohttp.resolver import ThreadedResolver
from yarl import URL

from node.registry.errors import Busy, CardTooLarge, CardUnreachable, HostBusy, UrlRefused
from node.registry.settings import RegistrySettings
from node.tooling.guards.urls import UrlGuard

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ETAG = re.compile(r'(W/)?"[\x21\x23-\x7e]{0,250}"')
_HEADERS = {"Accept": "application/json"}


@dataclass(frozen=True, slots=True)
class Fetched:
    """A card fetched: its bytes (``None`` when the server answered 304) and its validator."""

    body: bytes | None
    validator: str | None

    def unchanged(self, stored: str | None) -> bool:
        """True when the card is the one whose validator is ``stored`` (no parse needed)."""
        return stored is not None and (self.body is None or self.validator == stored)


def validator(body: bytes, etag: str | None) -> str:
    """What to store to recognise this card next time: the server's ETag when it sent a
    well-formed one, else ``sha256:`` of the body."""
    if etag is not None and _ETAG.fullmatch(etag):
        return etag
    return "sha256:" + hashlib.sha256(body).hexdigest()


class _Refused(Exception):
    """The SSRF guard's rules refuse this host."""


class _GuardedResolver(ThreadedResolver):
    """The system resolver, refusing a name when any of its addresses is not allowed."""

    def __init__(self, guard: UrlGuard) -> None:
        super().__init__()
        self.guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        hosts = await super().resolve(host, port, family)
        for entry in hosts:
            _check(self.guard, host, entry["host"])
        return hosts


def _check(guard: UrlGuard, host: str, address: str) -> None:
    if not guard.allows(ip_address(address.split("%", 1)[0])):
        raise _Refused(
            f"refused {host!r}: it resolves to a non-public address (loopback, private, "
            "link-local, shared or reserved); only public hosts may be fetched"
        )


@dataclass(slots=True)
class _Host:
    slots: asyncio.Semaphore
    users: int = 0


class FetchSlots:
    """A global semaphore and one per origin; a waiter gives up after a bounded time.

    ``async with slots.slot(origin, wait_s):`` holds one of each. A slot free at once is taken
    without arming a timer (the common case costs two semaphore operations)."""

    def __init__(self, total: int, per_host: int) -> None:
        self._total = asyncio.Semaphore(total)
        self._per_host = per_host
        self._hosts: dict[str, _Host] = {}  # only origins with a fetch running or waiting

    @property
    def per_host(self) -> int:
        """Most fetches from one origin at once."""
        return self._per_host

    def free(self, origin: str) -> bool:
        """True when a slot for ``origin`` would be taken at once."""
        host = self._hosts.get(origin)
        return not self._total.locked() and (host is None or not host.slots.locked())

    def slot(self, origin: str, wait_s: float | None) -> _Slot:
        """Hold a slot for ``origin``; :class:`HostBusy` / :class:`Busy` after ``wait_s``."""
        return _Slot(self, origin, wait_s)

    async def acquire(self, origin: str, wait_s: float | None) -> _Host:
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = _Host(asyncio.Semaphore(self._per_host))
        host.users += 1
        try:
            deadline = None if wait_s is None else asyncio.get_running_loop().time() + wait_s
            if not await _take(host.slots, deadline):
                raise HostBusy(
                    f"{self._per_host} card fetches from {origin} are already running; retry later"
                )
            try:
                if not await _take(self._total, deadline):
                    raise Busy("the registry is fetching as many cards as it may; retry later")
            except BaseException:
                host.slots.release()
                raise
        except BaseException:
            self._leave(origin, host)
            raise
        return host

    def release(self, origin: str, host: _Host) -> None:
        self._total.release()
        host.slots.release()
        self._leave(origin, host)

    def _leave(self, origin: str, host: _Host) -> None:
        host.users -= 1
        if host.users == 0:
            del self._hosts[origin]


async def _take(semaphore: asyncio.Semaphore, deadline: float | None) -> bool:
    """Acquire ``semaphore`` by ``deadline`` (loop time; ``None``: no limit); False if not."""
    if not semaphore.locked() or deadline is None:
        await semaphore.acquire()
        return True
    try:
        async with asyncio.timeout_at(deadline):
            await semaphore.acquire()
    except TimeoutError:
        return False
    return True


class _Slot:
    """``async with`` form of :meth:`FetchSlots.acquire` / :meth:`FetchSlots.release`."""

    __slots__ = ("_host", "_origin", "_slots", "_wait_s")

    def __init__(self, slots: FetchSlots, origin: str, wait_s: float | None) -> None:
        self._slots, self._origin, self._wait_s = slots, origin, wait_s
        self._host: _Host | None = None

    async def __aenter__(self) -> None:
        self._host = await self._slots.acquire(self._origin, self._wait_s)

    async def __aexit__(self, *exc: object) -> None:
        assert self._host is not None
        self._slots.release(self._origin, self._host)


class CardFetcher:
    """Fetches card documents for the registry (see the module docstring)."""

    def __init__(self, guard: UrlGuard, settings: RegistrySettings) -> None:
        self.guard = guard
        self.timeout_s = settings.fetch_timeout_s
        self.max_bytes = settings.max_card_bytes
        self.concurrency = settings.fetch_concurrency
        """Most fetches in flight at once."""
        self._limit_per_host = settings.fetch_per_host
        self.slots = FetchSlots(settings.fetch_concurrency, settings.fetch_per_host)
        self._session: aiohttp.ClientSession | None = None
        self._literals: dict[str, bool] = {}  # host -> allowed (True for names)
        self.requests = 0
        """HTTP requests sent (tests and benches)."""
        self.conditional = 0
        """Of which carried ``If-None-Match``."""
        self.no_pipeline: set[str] = set()
        """Origins that broke a pipeline (:mod:`node.registry.pipelined`): fetched one by one."""

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:  # made on first use, inside the running loop
            connector = aiohttp.TCPConnector(
                limit=self.concurrency,
                limit_per_host=self._limit_per_host,
                resolver=_GuardedResolver(self.guard),
                ttl_dns_cache=10,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                headers=_HEADERS,
                trust_env=False,
                timeout=aiohttp.ClientTimeout(),  # fetch() bounds the whole fetch itself
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(self, url: str, *, stored: str | None = None, wait_s: float | None) -> Fetched:
        """GET ``url`` (in a slot, waiting at most ``wait_s``); ``stored`` is the card's stored
        validator. Raises a :class:`CardError`, :class:`Busy` or :class:`HostBusy`."""
        target = URL(url)
        origin = f"{target.scheme}://{target.host_port_subcomponent}"
        etag = stored if stored is not None and not stored.startswith("sha256:") else None
        async with self.slots.slot(origin, wait_s):
            try:
                async with asyncio.timeout(self.timeout_s):
                    return await self._get(target, etag)
            except TimeoutError as exc:
                raise CardUnreachable(
                    f"card URL unreachable: no card within {self.timeout_s:g} s"
                ) from exc
            except _Refused as exc:
                raise UrlRefused(f"card URL refused: {exc}") from exc
            except aiohttp.InvalidUrlClientError as exc:
                raise UrlRefused(f"card URL refused: {exc}") from exc
            except aiohttp.ClientConnectorDNSError as exc:
                raise CardUnreachable(
                    f"card URL unreachable: the name {target.host!r} does not resolve"
                ) from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise CardUnreachable(
                    f"card URL unreachable: {type(exc).__name__}: {str(exc)[:300]}"
                ) from exc

    async def _get(self, target: URL, etag: str | None) -> Fetched:
        headers = {"If-None-Match": etag} if etag else None
        for _hop in range(self.guard.max_redirects + 1):
            if target.scheme not in ("http", "https") or not target.host:
                raise UrlRefused(f"card URL refused: a redirect to {str(target)[:200]!r}")
            self._check_literal(target.host)
            self.requests += 1
            self.conditional += bool(headers)
            async with self._http().get(target, headers=headers, allow_redirects=False) as r:
                location = r.headers.get("Location")
                if r.status in _REDIRECTS and location:
                    target = target.join(URL(location))
                    continue
                if r.status == 304 and etag:
                    return Fetched(None, etag)
                if not 200 <= r.status < 300:
                    raise CardUnreachable(f"card URL answered HTTP {r.status}")
                if r.content_length is not None and r.content_length > self.max_bytes:
                    raise CardTooLarge(f"card is larger than {self.max_bytes} bytes")
                if r.content_length is not None and "Content-Encoding" not in r.headers:
                    body = await r.read()  # the length is the body's, and within the limit
                else:  # unknown length, or decompressed: count while reading
                    body = await self._read(r)
                return Fetched(body, validator(body, r.headers.get("ETag")))
        raise CardUnreachable(f"card URL needed more than {self.guard.max_redirects} redirects")

    def _check_literal(self, host: str) -> None:
        """Refuse an IP-literal host the guard refuses (names are checked by the resolver);
        the answers for recent hosts are kept."""
        allowed = self._literals.get(host)
        if allowed is None:
            try:
                address = ip_address(host.split("%", 1)[0])
            except ValueError:
                allowed = True  # a name: the resolver checks every address it gives
            else:
                allowed = self.guard.allows(address)
            if len(self._literals) >= 4096:
                self._literals.clear()
            self._literals[host] = allowed
        if not allowed:
            _check(self.guard, host, host)  # raises, saying why

    async def _read(self, response: aiohttp.ClientResponse) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > self.max_bytes:
                raise CardTooLarge(f"card is larger than {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
