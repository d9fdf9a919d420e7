"""McpLink: one MCP server, supervised by one task that owns its ``mcp.Client``.

The ``mcp`` client must be opened and closed by the same task, and over streamable HTTP a dying
server can tear the whole client down with an ``ExceptionGroup``. So :meth:`McpLink.run` is the
only place a client is entered: it connects within ``connect_timeout_s`` (a cancel scope whose
deadline is lifted once connected, so a server that never answers costs that long and leaks no
process), lists every page of tools, hands them to ``on_tools``, then holds the session until a
call finds it dead, and reconnects, with exponential backoff after failures. While idle it lists
the tools again every ``probe_s`` seconds: a server that died unnoticed is reconnected, and a
changed tool list is installed. Calls come from other tasks through :meth:`McpLink.call`; one
that finds the session closed asks for a new one and retries once.

States (``/readyz``): ``connecting`` → ``connected`` → (session died) ``connecting`` … or
``down`` (the last error is kept; the next attempt comes after the backoff) and ``stopped``.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from typing import Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from node.card import McpServer
from node.errors import ToolExecutionError, ToolTimeout
from node.mcp.transport import open_transport
from node.tooling.guards.urls import UrlGuard

__all__ = ["LinkState", "McpLink"]

log = logging.getLogger(__name__)

LinkState = Literal["connecting", "connected", "down", "stopped"]
MAX_PAGES = 100  # tools/list pages read per connection (a hard bound on a looping cursor)
PROBE_S = 30.0  # seconds between idle re-listings of a connected server
_DEAD_CODES = frozenset({types.CONNECTION_CLOSED})
_SESSION_GONE = "Session not found"  # legacy HTTP after a server restart


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def describe(exc: BaseException) -> str:
    """One line for an error that may be a nested ``ExceptionGroup`` (its first leaves)."""
    leaves = _leaves(exc)
    text = "; ".join(f"{type(e).__name__}: {e}".rstrip(": ") for e in leaves[:3])
    return text[:500]


def _session_died(exc: BaseException) -> bool:
    if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
        return True
    if isinstance(exc, MCPError):
        return exc.error.code in _DEAD_CODES or _SESSION_GONE in exc.error.message
    return False


class McpLink:
    """The supervisor of one MCP server and the way every call to it goes."""

    def __init__(
        self,
        server: McpServer,
        on_tools: Callable[[McpLink, Sequence[types.Tool]], None],
        *,
        url_guard: UrlGuard | None = None,
        backoff: tuple[float, float] = (0.5, 30.0),
        probe_s: float = PROBE_S,
    ) -> None:
        self.server = server
        self.name = server.name
        self.state: LinkState = "connecting"
        self.error: str | None = None
        self.connections = 0
        self.protocol: str | None = None
        self._on_tools = on_tools
        self._url_guard = url_guard
        self._backoff = backoff
        self._probe_s = probe_s
        self._client: Client | None = None
        self._changed = anyio.Event()  # set (and replaced) whenever the state changes
        self._dead = anyio.Event()

    # -- the supervisor -------------------------------------------------------------------

    async def run(self) -> None:
        """Connect and reconnect until cancelled (run it as the server's own task)."""
        delay = self._backoff[0]
        try:
            while True:
                self._set("connecting")
                try:
                    await self._session()
                    delay = self._backoff[0]  # the session lived: reconnect at once
                    continue
                except Exception as exc:  # an ExceptionGroup too: the client tore down
                    self.error = describe(exc)
                    log.warning("MCP server %r: %s (retry in %.1f s)", self.name, self.error, delay)
                self._set("down")
                await anyio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self._backoff[1])
        finally:
            self._set("stopped")

    async def _session(self) -> None:
        server = self.server
        with anyio.CancelScope(deadline=anyio.current_time() + server.connect_timeout_s) as scope:
            if server.url is not None and self._url_guard is not None:
                await self._url_guard.check(server.url)
            transport = open_transport(server, read_timeout_s=server.timeout_s + 30.0)
            async with Client(
                transport,
                read_timeout_seconds=server.timeout_s,
                mode=server.protocol,
                cache=None,
            ) as client:
                tools = await _list_tools(client)
                scope.deadline = math.inf
                self._on_tools(self, tools)
                self.protocol = client.protocol_version
                self.connections += 1
                self.error = None
                self._client = client
                self._set("connected")
                try:
                    await self._hold(client, tools)
                finally:
                    self._client = None
                    self._dead = anyio.Event()
        if scope.cancelled_caught:
            raise TimeoutError(f"no answer within {server.connect_timeout_s:g} s")

    async def _hold(self, client: Client, listed: list[types.Tool]) -> None:
        """Keep the session until a call drops it; re-list every ``probe_s`` (errors raise)."""
        while True:
            with anyio.move_on_after(self._probe_s):
                await self._dead.wait()
            if self._dead.is_set() or self._client is not client:
                return
            with anyio.fail_after(self.server.timeout_s):
                tools = await _list_tools(client)
            if tools != listed:
                listed = tools
                self._on_tools(self, tools)

    def _set(self, state: LinkState) -> None:
        self.state = state
        self._changed.set()
        self._changed = anyio.Event()

    def _drop(self, client: Client) -> None:
        """Ask the supervisor for a new session, if ``client`` is still the current one."""
        if self._client is client:
            self._client = None
            self._dead.set()

    # -- calls ----------------------------------------------------------------------------

    async def wait_settled(self) -> None:
        """Wait until the link is connected, down or stopped (not connecting)."""
        while self.state == "connecting":
            await self._changed.wait()

    async def _connected(self, deadline: float) -> Client:
        while self._client is None:
            if self.state in ("down", "stopped"):
                raise ToolExecutionError(
                    f"MCP server {self.name!r} is unavailable ({self.error or self.state})"
                )
            with anyio.move_on_after(deadline - anyio.current_time()) as waited:
                await self._changed.wait()
            if waited.cancelled_caught:
                raise ToolTimeout(f"MCP server {self.name!r} did not connect in time")
        return self._client

    async def call(
        self, tool: str, arguments: dict[str, object], timeout: float
    ) -> types.CallToolResult:
        """Call ``tool``; a session found dead is replaced and the call retried once."""
        deadline = anyio.current_time() + timeout
        for attempt in (1, 2):
            client = await self._connected(deadline)
            left = max(deadline - anyio.current_time(), 0.001)
            try:
                return await client.call_tool(tool, arguments, read_timeout_seconds=left)
            except MCPError as exc:
                if exc.error.code == types.REQUEST_TIMEOUT:
                    raise ToolTimeout(f"{tool} on MCP server {self.name!r} timed out") from None
                if not _session_died(exc) or attempt == 2:
                    raise ToolExecutionError(
                        f"MCP server {self.name!r}: {exc.error.message}"
                    ) from exc
                self._drop(client)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
                if attempt == 2:
                    raise ToolExecutionError(
                        f"MCP server {self.name!r}: connection closed"
                    ) from exc
                self._drop(client)
            except RuntimeError as exc:  # e.g. structured content not matching its schema
                raise ToolExecutionError(f"MCP server {self.name!r}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover


async def _list_tools(client: Client) -> list[types.Tool]:
    """Every page of ``tools/list`` (at most :data:`MAX_PAGES`)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools
    log.warning("tools/list gave more than %d pages; the rest is ignored", MAX_PAGES)
    return tools
