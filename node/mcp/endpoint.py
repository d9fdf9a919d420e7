"""``/mcp``: the node's skills over MCP streamable HTTP, mounted in the node's own app.

:class:`McpEndpoint` is an ASGI app (one ``StreamableHTTPSessionManager`` from the ``mcp``
package) behind the node's middleware: the request-body limit and the node's authentication run
first (``/mcp`` is not a public path), so every MCP request carries the node's principal and
capabilities; the JSON body guard leaves ``/mcp`` to the MCP SDK, which checks its own JSON.
Sessions are stateful (a legacy client's ``notifications/cancelled`` reaches its request), and
each request is authorised by its own credentials, not by the session that it names.

When auth is off, Host and Origin must name the node itself (its public URL, or loopback),
so a web page cannot reach a node's skills through DNS rebinding.

``open`` runs the session manager; enter it in the app's lifespan (the task that also exits it).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from a2a.server.request_handlers import RequestHandler
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from node.card import NodeCard
from node.mcp.skill_server import skill_server
from node.tooling.tool import Tool

__all__ = ["MCP_PATH", "McpEndpoint", "mcp_endpoint_for"]

MCP_PATH = "/mcp"
_LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def _security(public_url: str, auth_enabled: bool) -> TransportSecuritySettings:
    if auth_enabled:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    parts = urlsplit(public_url)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[parts.netloc, *_LOOPBACK_HOSTS],
        allowed_origins=[
            f"{parts.scheme}://{parts.netloc}",
            *(f"http://{h}" for h in _LOOPBACK_HOSTS),
        ],
    )


class McpEndpoint:
    """The ASGI app serving ``server`` at :data:`MCP_PATH` (start it with :meth:`open`)."""

    def __init__(
        self, server: Server[Any], *, public_url: str, auth_enabled: bool, max_body_bytes: int
    ) -> None:
        self.manager = StreamableHTTPSessionManager(
            app=server,
            security_settings=_security(public_url, auth_enabled),
            max_request_body_size=max_body_bytes,
            session_idle_timeout=600.0,
            max_sessions=1000,
        )

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


def mcp_endpoint_for(
    card: NodeCard,
    handler: RequestHandler,
    skills: Callable[[], Mapping[str, Tool]],
    public_url: str,
) -> McpEndpoint | None:
    """The ``/mcp`` endpoint of a node whose card turns it on (``mcp.enabled``), else None."""
    if not card.mcp.enabled:
        return None
    server = skill_server(
        handler, skills, name=card.name, version=card.version, description=card.description
    )
    return McpEndpoint(
        server,
        public_url=public_url,
        auth_enabled=card.auth.enabled,
        max_body_bytes=card.limits.max_body_bytes,
    )
