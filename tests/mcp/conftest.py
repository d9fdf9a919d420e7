"""MCP servers for the tests: the ``mcp`` package's ``MCPServer`` over stdio and streamable HTTP.

``stdio_server()`` describes the test server (``mcp_server.py``) as a card entry; ``mcp_http``
runs it in-process under uvicorn on a loopback port and can stop and restart it on that port.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from node.card import McpServer
from tests.mcp.mcp_server import build
from tests.servers import running

SERVER = Path(__file__).with_name("mcp_server.py")


def stdio_server(name: str = "t", **changes: Any) -> McpServer:
    fields = {"command": sys.executable, "args": [str(SERVER), "stdio"], **changes}
    return McpServer(name=name, **fields)


def http_server(url: str, name: str = "h", **changes: Any) -> McpServer:
    return McpServer(name=name, url=url, **changes)


async def eventually(check: Any, timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check()`` (sync or async) until it returns a truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if hasattr(value, "__await__"):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await anyio.sleep(0.02)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        if marker.encode() in cmdline and "State:\tZ" not in status:
            found.append(int(entry))
    return found


class HttpMcp:
    """The test MCP server on one loopback port, which a test may stop and start again."""

    def __init__(self) -> None:
        self.port = 0
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        self._stack = contextlib.AsyncExitStack()
        await self._stack.enter_async_context(running(build().streamable_http_app(), sock))

    async def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.aclose()


@pytest.fixture
async def mcp_http() -> AsyncIterator[HttpMcp]:
    server = HttpMcp()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
