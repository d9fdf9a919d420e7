"""Fixtures for the built-in tools: a schema-checking caller, contexts, and a live web server."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from node.tooling import Tool, ToolContext
from node.tooling.guards import UrlGuard, Workspace
from node.tooling.isolation import close_default_pool

Call = Callable[..., Awaitable[Any]]
PAGE = """<!doctype html><html><head><title>Test Page</title>
<style>body { color: red }</style><script>var secret = 1;</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Welcome</h1><p>First paragraph with <b>bold</b> text.</p><p>Second<br>line.</p>
<ul><li>one</li><li>two</li></ul>
<a href="/docs/a.html#intro">Docs</a> <a href="https://example.org/x">Ext</a>
<a href="mailto:a@b.c">Mail</a> <a href="javascript:void(0)">JS</a> <a href="/docs/a.html">Again</a>
<footer>Copyright</footer></body></html>"""


@pytest.fixture(autouse=True)
def _no_worker_left() -> Iterator[None]:
    """Every test ends with no worker process left running (the default pool is closed)."""
    yield
    close_default_pool()


@pytest.fixture
def call() -> Call:
    """Call a tool the way the registry does: validate (and fill defaults) with its schema first."""

    async def run(tool: Tool, ctx: ToolContext | None = None, /, **arguments: Any) -> Any:
        validated = fastjsonschema.compile(dict(tool.parameters))(arguments)
        return await tool.execute(validated, ctx or ToolContext())

    return run


@pytest.fixture
def ws_ctx(tmp_path: Path) -> ToolContext:
    root = tmp_path / "ws"
    root.mkdir()
    return ToolContext(workspace=Workspace(root))


def _app() -> Starlette:
    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def data(request: Request) -> Response:
        return JSONResponse({"items": [1, 2, 3]})

    async def binary(request: Request) -> Response:
        return Response(b"\x89PNG\x00\x01" * 100, media_type="image/png")

    async def plain(request: Request) -> Response:
        return Response("x" * int(request.query_params.get("n", "10")), media_type="text/plain")

    async def private(request: Request) -> Response:
        return RedirectResponse("http://192.168.1.1/")

    routes = [("/page", page), ("/data", data), ("/binary", binary), ("/plain", plain)]
    return Starlette(routes=[Route(p, f) for p, f in [*routes, ("/private", private)]])


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """Base URL of a live server on 127.0.0.1, run in a thread for the whole session."""
    srv = uvicorn.Server(uvicorn.Config(_app(), host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert thread.is_alive(), "server crashed while starting"
        assert time.monotonic() < deadline, "server did not start in time"
        time.sleep(0.005)
    yield f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture
async def web_ctx() -> AsyncIterator[ToolContext]:
    """A context allowed to reach 127.0.0.1 only (besides public addresses)."""
    async with httpx.AsyncClient() as client:
        yield ToolContext(http=client, url_guard=UrlGuard(allow_cidrs=["127.0.0.1/32"]))
