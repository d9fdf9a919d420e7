"""``a2a-node mcp-stdio CARD``: a node's skills as an MCP server on stdin/stdout.

For desktop hosts that start their MCP servers as child processes. The node is the same app as
``serve`` builds (its lifespan opens the task store, peers and MCP servers) but takes no HTTP
requests: the one MCP client is the process's parent, with the card's anonymous capabilities.
stdout carries the protocol only; logs go to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette
from starlette.routing import Route

from node.card import McpEndpoint as McpEndpointSettings
from node.card import NodeCard
from node.errors import ConfigError
from node.mcp.endpoint import MCP_PATH, McpEndpoint

__all__ = ["serve_stdio"]


def _skill_server(app: Starlette) -> Server[Any]:
    for route in app.routes:
        if (
            isinstance(route, Route)
            and route.path == MCP_PATH
            and isinstance(route.app, McpEndpoint)
        ):
            return route.app.manager.app
    raise ConfigError("the node has no MCP endpoint")  # pragma: no cover - enabled below


async def serve_stdio(
    card: NodeCard, *, data_dir: Path | None = None, store: str | None = None
) -> None:
    """Serve ``card``'s public skills over stdio until the client closes stdin."""
    from node.server.app import build_node_app

    card = card.model_copy(update={"mcp": McpEndpointSettings(enabled=True)})
    app = build_node_app(card, data_dir=data_dir, store=store)
    server = _skill_server(app)
    async with app.router.lifespan_context(app), stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
