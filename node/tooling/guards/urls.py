"""SSRF guard: a URL may be fetched only when every address it resolves to is public.

    guard = UrlGuard(allow_cidrs=["127.0.0.1/32"])
    await guard.check("https://example.org/")                 # [IPv4Address('93.184.215.14')]
    response = await guard.fetch(client, "GET", "https://example.org/")

:meth:`UrlGuard.fetch` connects to the very address it checked (the URL's host is replaced by
the IP literal; the original name goes in the ``Host`` header and the TLS SNI/certificate check),
so DNS rebinding between check and connect cannot redirect it. Redirects are followed by hand and
every hop is checked again before any byte is sent. HTTPS requests carry ``Connection: close`` so
a pooled TLS connection made for one name is never reused for another name on the same address.
"""

from __future__ import annotations

import asyncio
import codecs
import json as jsonlib
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any

import httpx

from node.errors import ConfigError, GuardError, ToolExecutionError, ToolTimeout

__all__ = ["FetchResponse", "IPAddress", "UrlGuard", "is_public_address"]

IPAddress = IPv4Address | IPv6Address
_6TO4 = IPv6Network("2002::/16")
_NAT64 = IPv6Network("64:ff9b::/96")
_CGNAT = IPv4Network("100.64.0.0/10")
_REDIRECTS = {301, 302, 303, 307, 308}
_CREDENTIAL_HEADERS = ("authorization", "cookie", "proxy-authorization")


def _embedded_v4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address carried inside an IPv4-compatible, 6to4 or NAT64 address."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if int(ip) >> 32 == 0 or ip in _NAT64:  # ::a.b.c.d (deprecated compat), 64:ff9b::a.b.c.d
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public_address(ip: IPAddress | str) -> bool:
    """True when ``ip`` is globally routable unicast (and so is any IPv4 address inside it)."""
    address = ip_address(ip) if isinstance(ip, str) else ip
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket
            return is_public_address(address.ipv4_mapped)
        inner = _embedded_v4(address)
        if inner is not None and not is_public_address(inner):
            return False
        if address.teredo is not None or address.is_site_local:
            return False
    elif address in _CGNAT:
        return False
    return address.is_global and not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    )


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """A fully read, size-bounded HTTP response; ``url`` is the final URL (after redirects)."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    url: str

    @property
    def content_type(self) -> str:
        value: str = self.headers.get("content-type", "")
        return value.split(";")[0].strip().lower()

    @property
    def encoding(self) -> str:
        message = Message()
        message["content-type"] = str(self.headers.get("content-type", ""))
        charset = message.get_content_charset() or "utf-8"
        try:
            return codecs.lookup(charset).name
        except LookupError:
            return "utf-8"

    @property
    def text(self) -> str:
        return self.content.decode(self.encoding, errors="replace")

    def json(self) -> Any:
        try:
            return jsonlib.loads(self.text)
        except ValueError as exc:
            raise ToolExecutionError(
                f"the response from {self.url} is not valid JSON: {exc}"
            ) from exc


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


class UrlGuard:
    """Checks URLs against public-address rules, with optional allowed CIDRs, and fetches them."""

    def __init__(self, allow_cidrs: Sequence[str] = (), max_redirects: int = 5) -> None:
        try:
            self.allowed = tuple(ip_network(cidr, strict=False) for cidr in allow_cidrs)
        except ValueError as exc:
            raise ConfigError(f"invalid CIDR in allow_cidrs: {exc}") from exc
        if max_redirects < 0:
            raise ConfigError("max_redirects must be >= 0")
        self.max_redirects = max_redirects

    def allows(self, ip: IPAddress) -> bool:
        """True when ``ip`` is public or inside an allowed CIDR."""
        if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip.version == net.version and ip in net for net in self.allowed):
            return True
        return is_public_address(ip)

    async def check(self, url: str | httpx.URL) -> list[IPAddress]:
        """Return the addresses ``url`` resolves to, or raise :class:`GuardError`."""
        target = self._parse(url)
        host = target.host
        try:
            addresses: list[IPAddress] = [ip_address(host)]
        except ValueError:
            addresses = await self._resolve(target)
        for ip in addresses:
            if not self.allows(ip):
                raise GuardError(
                    f"refused {host!r}: it resolves to a non-public address (loopback, private, "
                    "link-local, shared or reserved); only public hosts may be fetched"
                )
        return addresses

    async def fetch(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        content: bytes | str | None = None,
        timeout: float = 10.0,
        max_bytes: int = 1_000_000,
    ) -> FetchResponse:
        """Fetch ``url`` with every hop checked; the body is read up to ``max_bytes``.

        ``timeout`` bounds the whole fetch (DNS, redirects and body). Raises
        :class:`GuardError` (refused address, too many redirects, body too large),
        :class:`ToolTimeout`, or :class:`ToolError` (transport failure); never an httpx error.
        """
        try:
            async with asyncio.timeout(timeout):
                return await self._fetch(
                    client, method.upper(), url, dict(headers or {}), json, content, timeout,
                    max_bytes,
                )  # fmt: skip
        except TimeoutError as exc:
            raise ToolTimeout(f"fetching {url} took longer than {timeout:g} s") from exc
        except httpx.TimeoutException as exc:
            raise ToolTimeout(f"fetching {url} timed out ({type(exc).__name__})") from exc
        except (httpx.HTTPError, httpx.StreamError, httpx.InvalidURL) as exc:
            raise ToolExecutionError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from exc

    async def _fetch(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        headers: dict[str, str],
        json: Any,
        content: bytes | str | None,
        http_timeout: float,
        max_bytes: int,
    ) -> FetchResponse:
        target = self._parse(url)
        for _hop in range(self.max_redirects + 1):
            ip = (await self.check(target))[0]
            host = target.raw_host.decode("ascii")
            hop_headers = {**headers, "Host": target.netloc.decode("ascii")}
            extensions: dict[str, Any] = {}
            if target.scheme == "https":
                extensions["sni_hostname"] = host
                hop_headers["Connection"] = "close"
            async with client.stream(
                method,
                target.copy_with(host=str(ip)),
                headers=hop_headers,
                json=json,
                content=content,
                timeout=http_timeout,
                follow_redirects=False,
                extensions=extensions,
            ) as response:
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    next_target = self._parse(target.join(location))
                    if _origin(next_target) != _origin(target):
                        headers = {
                            k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS
                        }
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method == "POST"
                    ):
                        method = "GET" if method != "HEAD" else method
                        json = content = None
                    target = next_target
                    continue
                body = await self._read(response, max_bytes, str(target))
                return FetchResponse(response.status_code, response.headers, body, str(target))
        raise GuardError(f"fetching {url} needed more than {self.max_redirects} redirects")

    @staticmethod
    async def _read(response: httpx.Response, max_bytes: int, url: str) -> bytes:
        too_large = f"the response from {url} is larger than max_bytes={max_bytes}"
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise GuardError(too_large)
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise GuardError(too_large)
            chunks.append(chunk)
        return b"".join(chunks)

    @staticmethod
    def _parse(url: str | httpx.URL) -> httpx.URL:
        try:
            target = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise GuardError(f"invalid URL {str(url)!r}: {exc}") from exc
        if target.scheme not in ("http", "https"):
            raise GuardError(f"refused URL {str(url)!r}: only http and https URLs may be fetched")
        if not target.host:
            raise GuardError(f"refused URL {str(url)!r}: it has no host")
        return target

    @staticmethod
    async def _resolve(target: httpx.URL) -> list[IPAddress]:
        host = target.raw_host.decode("ascii")
        port = target.port or (443 if target.scheme == "https" else 80)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:
            raise GuardError(f"refused {host!r}: the name does not resolve") from exc
        addresses: list[IPAddress] = []
        for *_, sockaddr in infos:
            ip = ip_address(str(sockaddr[0]).split("%", 1)[0])
            if ip not in addresses:
                addresses.append(ip)
        if not addresses:
            raise GuardError(f"refused {host!r}: the name does not resolve")
        return addresses
