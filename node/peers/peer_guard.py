"""Where a peer learned from a registry may be called: the SSRF guard for discovered peers.

A registry entry is data from elsewhere: its card URL and interface URLs could point at a cloud
metadata endpoint or a private service. Such a peer is kept only if every URL passes a
:class:`UrlGuard` that allows public addresses, the ranges in ``peers.allow_cidrs``, and the
registry's own host (so a local network on 127.0.0.1 needs no configuration). Static peers are
the operator's own words and are not checked. A gRPC interface (``host:port``) is checked as
the address its channel connects to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence

import httpx
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import TransportProtocol

from node.errors import ConfigError, GuardError
from node.peers.grpc_channels import grpc_target
from node.tooling.guards.urls import UrlGuard

__all__ = ["PeerGuard"]


class PeerGuard:
    """Checks discovered peers' URLs: public ranges, ``allow_cidrs`` and the registry host."""

    def __init__(self, allow_cidrs: Sequence[str] = ()) -> None:
        self.allow_cidrs = tuple(allow_cidrs)

    async def for_registry(self, registry_url: str) -> UrlGuard:
        """A guard that also allows the addresses the registry's own host resolves to."""
        host = httpx.URL(registry_url).host
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, None, type=socket.SOCK_STREAM
            )
        except OSError:
            infos = []
        own = {str(ipaddress.ip_network(str(info[4][0]).split("%")[0])) for info in infos}
        return UrlGuard(allow_cidrs=[*self.allow_cidrs, *sorted(own)])

    @staticmethod
    async def refusal(guard: UrlGuard, card: AgentCard, card_url: str) -> str | None:
        """Why this peer may not be called, or ``None`` when every URL it names is allowed."""
        try:
            urls = [card_url, *(_http_form(i) for i in card.supported_interfaces)]
        except ConfigError as exc:
            return str(exc)
        for url in filter(None, urls):
            try:
                await guard.check(url)
            except GuardError as exc:
                return str(exc)
        return None


def _http_form(interface: AgentInterface) -> str:
    """The interface URL as the guard reads it (a gRPC ``host:port`` as ``http(s)://host:port``)."""
    if interface.protocol_binding != TransportProtocol.GRPC:
        return interface.url
    target, tls = grpc_target(interface.url)
    return f"{'https' if tls else 'http'}://{target}"
