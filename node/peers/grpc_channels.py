"""gRPC channels to peers: one per target, with bounded limits, closed with the directory.

The SDK's ``ClientFactory`` asks ``ClientConfig.grpc_channel_factory(url)`` for a channel when a
peer's card prefers the GRPC binding. :class:`GrpcChannels` is that factory: like the node's one
shared ``httpx.AsyncClient``, it keeps one channel per target for every client that calls it and
closes them all at shutdown (a peer whose card changes reuses its channel).

A card's gRPC URL may be ``host:port`` (what 0.3 cards and the SDK's samples use),
``grpc://host:port``, ``http://…`` (plaintext) or ``grpcs://…`` / ``https://…`` (TLS, system
roots). Limits: messages up to ``max_message_bytes`` each way, a connection attempt given
``connect_timeout_s``, reconnect backoff capped, keepalive pings so a dead connection is
noticed, and the channel's own retries off (the peer client retries transient failures itself,
so retries and deadlines are the same on every binding). Each call's deadline comes from the
call (``ClientCallContext.timeout``, and the peer client's own ``asyncio.timeout``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import grpc
import grpc.aio

from node.errors import ConfigError

__all__ = ["GrpcChannels", "grpc_target"]

_TLS_SCHEMES = frozenset({"grpcs", "https"})
_PLAIN_SCHEMES = frozenset({"grpc", "http"})
CLOSE_GRACE_S = 1.0


def grpc_target(url: str) -> tuple[str, bool]:
    """``(host:port, tls)`` for a card's gRPC interface URL; ``ConfigError`` when unusable."""
    text = url.strip()
    has_scheme = "://" in text
    parts = urlsplit(text if has_scheme else f"grpc://{text}")
    scheme = parts.scheme.lower()
    if scheme not in _TLS_SCHEMES | _PLAIN_SCHEMES or not parts.hostname:
        raise ConfigError(f"not a gRPC address: {url!r}")
    try:
        port = parts.port or (443 if scheme in _TLS_SCHEMES else None)
    except ValueError as exc:
        raise ConfigError(f"not a gRPC address: {url!r}: {exc}") from exc
    if port is None:
        raise ConfigError(f"gRPC address without a port: {url!r}")
    host = parts.hostname
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}", scheme in _TLS_SCHEMES


class GrpcChannels:
    """The ``grpc_channel_factory`` of every peer client: one cached channel per target."""

    def __init__(
        self,
        *,
        max_message_bytes: int = 16 * 1024 * 1024,
        max_reconnect_backoff_s: float = 5.0,
        connect_timeout_s: float = 5.0,
        keepalive_s: float = 30.0,
    ) -> None:
        self._options: list[tuple[str, int]] = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.initial_reconnect_backoff_ms", 100),
            # gRPC also reads this as the least time one connection attempt may take.
            ("grpc.min_reconnect_backoff_ms", int(connect_timeout_s * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(max_reconnect_backoff_s * 1000)),
            ("grpc.keepalive_time_ms", int(keepalive_s * 1000)),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.enable_retries", 0),
        ]
        self._channels: dict[tuple[str, bool], grpc.aio.Channel] = {}

    def __call__(self, url: str) -> grpc.aio.Channel:
        """The channel for ``url`` (created on first use)."""
        key = grpc_target(url)
        channel = self._channels.get(key)
        if channel is None:
            target, tls = key
            if tls:
                credentials = grpc.ssl_channel_credentials()
                channel = grpc.aio.secure_channel(target, credentials, options=self._options)
            else:
                channel = grpc.aio.insecure_channel(target, options=self._options)
            self._channels[key] = channel
        return channel

    async def aclose(self) -> None:
        """Close every channel (calls still running on them are cancelled)."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close(grace=CLOSE_GRACE_S)
