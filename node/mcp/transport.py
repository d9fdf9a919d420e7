"""How the node reaches one MCP server: a stdio child process or a streamable HTTP URL.

:func:`open_transport` returns what ``mcp.Client`` takes: an async context manager yielding the
``(read, write)`` streams, entered (and so owned) by the server's supervisor task.

- stdio: the child inherits only ``HOME, LOGNAME, PATH, SHELL, TERM, USER`` (the SDK's rule),
  the card's ``env_passthrough`` names and its ``env`` (secrets as ``${VAR}``); its stderr goes
  to the node's. The SDK closes it with stdin, then SIGTERM, then SIGKILL of its process group.
- HTTP: one ``httpx2.AsyncClient`` per connection with the card's headers; its read timeout
  outlives the longest call. :class:`NoRaiseTransport` turns a transport failure (refused,
  reset, timeout) into a JSON-RPC error for that one request, instead of the exception that
  would tear the whole ``mcp`` client down (python-sdk issue #915).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from node.card import McpServer

__all__ = ["NoRaiseTransport", "open_transport", "stdio_parameters"]

_CONNECT_S = 5.0


def stdio_parameters(server: McpServer) -> StdioServerParameters:
    """The child process of a stdio server: command, arguments, directory and environment."""
    assert server.command is not None
    env = {name: os.environ[name] for name in server.env_passthrough if name in os.environ}
    env.update({name: value.get_secret_value() for name, value in server.env.items()})
    return StdioServerParameters(
        command=server.command, args=list(server.args), env=env or None, cwd=server.cwd
    )


class NoRaiseTransport(httpx2.AsyncBaseTransport):
    """Answers a failed request with a 503 JSON-RPC error body instead of raising."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.TransportError as exc:
            error = {"code": -32000, "message": f"transport error: {type(exc).__name__}: {exc}"}
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            return httpx2.Response(
                503, headers={"content-type": "application/json"}, content=body, request=request
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def _http(server: McpServer, read_timeout_s: float) -> AsyncIterator[Any]:
    assert server.url is not None
    headers = {name: value.get_secret_value() for name, value in server.headers.items()}
    async with (
        httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(read_timeout_s, connect=_CONNECT_S),
            transport=NoRaiseTransport(httpx2.AsyncHTTPTransport()),
            follow_redirects=False,
        ) as http,
        streamable_http_client(server.url, http_client=http) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def _stdio(server: McpServer) -> AsyncIterator[Any]:
    async with stdio_client(stdio_parameters(server), errlog=sys.stderr) as streams:
        yield streams


def open_transport(
    server: McpServer, read_timeout_s: float
) -> contextlib.AbstractAsyncContextManager[Any]:
    """The transport of ``server`` (enter it in the task that will exit it)."""
    return _stdio(server) if server.command is not None else _http(server, read_timeout_s)
