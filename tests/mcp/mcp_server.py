"""A real MCP server for the tests, built with the ``mcp`` package's ``MCPServer``.

    python tests/mcp/mcp_server.py stdio
    python tests/mcp/mcp_server.py http PORT        # http://127.0.0.1:PORT/mcp

``build()`` returns the server for in-process uvicorn (``streamable_http_app()``). Its
``tools/list`` pages three tools at a time, so every listing is paginated.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

PAGE = 3
LONG_NAME = "a_really_long_tool_name_" + "x" * 80


class Point(BaseModel):
    x: int
    y: int


def build() -> MCPServer:
    mcp = MCPServer("test-server", version="0.1.0", log_level="WARNING")

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}s"

    @mcp.tool()
    def boom() -> str:
        """Always fails."""
        raise ToolError("kaboom")

    @mcp.tool()
    def where(point: Point | None = None, label: str | None = None) -> dict[str, Any]:
        """Echo an optional point (a $ref schema) and label."""
        return {"point": None if point is None else point.model_dump(), "label": label}

    @mcp.tool(name="odd.name with/slash")
    def odd() -> str:
        """A tool with an odd name."""
        return "odd"

    @mcp.tool(name=LONG_NAME)
    def long() -> str:
        """A tool with a long name."""
        return "long"

    @mcp.tool()
    def env(name: str) -> str:
        """An environment variable of the server process."""
        return os.environ.get(name, "<unset>")

    @mcp.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    low = mcp._lowlevel_server
    entry = low.get_request_handler("tools/list")
    assert entry is not None

    async def paged(ctx: Any, params: Any) -> types.ListToolsResult:
        full = await entry.handler(ctx, params)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        return types.ListToolsResult(
            tools=full.tools[start:end], next_cursor=str(end) if end < len(full.tools) else None
        )

    low.add_request_handler("tools/list", entry.params_type, paged)
    return mcp


if __name__ == "__main__":
    server = build()
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
