"""McpToolset: the tools of every MCP server of a card, as one catalog, and their supervisors.

Each server has an :class:`~node.mcp.link.McpLink` run as its own task (:meth:`start`); after
each (re)connection the link hands over the server's tool list and the toolset installs a new
immutable :class:`~node.tooling.catalog.Toolbox` (bumping ``revision``, so the served card
follows). A tool is ``mcp_<server>_<tool>``: internal unless the card's per-tool overrides make
it public, in group ``mcp:<server>``, with the server's ``requires`` and ``timeout_s``. A tool
whose schema cannot be used is left out with a warning; it never takes the server down.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as types

from node.card import McpServer
from node.errors import ConfigError
from node.mcp.link import PROBE_S, McpLink
from node.mcp.names import mcp_tool_name
from node.mcp.schema import normalise_schema
from node.mcp.tool import McpTool
from node.tooling.catalog import SwappableCatalog
from node.tooling.guards.urls import UrlGuard
from node.tooling.schema import compile_schema
from node.tooling.tool import Tool, ToolPolicy

__all__ = ["McpToolset"]

log = logging.getLogger(__name__)


def build_tools(link: McpLink, listed: Sequence[types.Tool]) -> list[McpTool]:
    """The node's tools for one server's listing (enabled ones, with the card's overrides)."""
    server = link.server
    enabled = None if server.enabled_tools is None else set(server.enabled_tools)
    overrides = {ref.name: ref for ref in server.tools}
    tools: list[McpTool] = []
    for spec in listed:
        if enabled is not None and spec.name not in enabled:
            continue
        hints = spec.annotations
        base = ToolPolicy(
            read_only=bool(hints and hints.read_only_hint),
            timeout=server.timeout_s,
            requires=frozenset(server.requires),
            scope="internal",
            group=f"mcp:{server.name}",
        )
        ref = overrides.get(spec.name)
        policy = base if ref is None else ref.apply(base)
        if not base.requires <= policy.requires:  # a tool's own requires add to the server's
            policy = dataclasses.replace(policy, requires=policy.requires | base.requires)
        try:
            parameters = normalise_schema(spec.input_schema)
            compile_schema(parameters)
        except ConfigError as exc:
            log.warning("MCP server %r: tool %r left out: %s", server.name, spec.name, exc)
            continue
        tools.append(
            McpTool(
                link,
                name=mcp_tool_name(server.name, spec.name),
                original=spec.name,
                description=f"[mcp:{server.name}] {spec.description or spec.title or spec.name}",
                parameters=parameters,
                policy=policy,
            )
        )
    return tools


class McpToolset(SwappableCatalog):
    """A :class:`~node.tooling.catalog.ToolCatalog` of MCP tools, refreshed per connection."""

    def __init__(
        self,
        servers: Sequence[McpServer],
        url_guard: UrlGuard | None = None,
        *,
        probe_s: float = PROBE_S,
    ) -> None:
        self.links = [
            McpLink(s, self._install, url_guard=url_guard, probe_s=probe_s) for s in servers
        ]
        super().__init__()
        self._by_server: dict[str, list[McpTool]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _install(self, link: McpLink, listed: Sequence[types.Tool]) -> None:
        tools = build_tools(link, listed)
        self._by_server[link.name] = tools
        try:
            self.replace(t for ts in self._by_server.values() for t in ts)
        except ConfigError as exc:  # two servers' names collide after sanitising
            log.warning("MCP server %r: tools left out: %s", link.name, exc)
            self._by_server[link.name] = []
            return
        log.info("MCP server %r: %d tool(s)", link.name, len(tools))

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start one supervisor task per server (returns at once: nothing waits for them)."""
        self._tasks = [
            asyncio.create_task(link.run(), name=f"mcp:{link.name}") for link in self.links
        ]

    async def wait_settled(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) until no server is still connecting for the first time."""
        with anyio.move_on_after(timeout):
            for link in self.links:
                await link.wait_settled()

    async def aclose(self) -> None:
        """Stop every supervisor; each closes its own client (and child process)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def states(self) -> dict[str, dict[str, Any]]:
        """Each server's state for ``/readyz``: state, tools, connections, last error."""
        return {
            link.name: {
                "state": link.state,
                "tools": len(self._by_server.get(link.name, ())),
                "connections": link.connections,
                **({"error": link.error} if link.error else {}),
            }
            for link in self.links
        }


async def list_mcp_tools(toolset: McpToolset) -> tuple[list[Tool], dict[str, dict[str, Any]]]:
    """Connect to every server once (bounded), list its tools, close: ``a2a-node tools``."""
    toolset.start()
    try:
        timeout = max((link.server.connect_timeout_s for link in toolset.links), default=0.0)
        await toolset.wait_settled(timeout + 1.0)
        return list(toolset.tools()), toolset.states()
    finally:
        await toolset.aclose()
