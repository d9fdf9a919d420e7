"""The console's routes: ``/ui/`` (static files of this package) and ``/ui/config.json``.

The same page serves two roles, told apart by ``config.json``: on the registry it shows the
network (agents, health, search) and each agent's card; on a node it shows that node (its card,
a form per skill, its recent tasks and each task's live progress). The page only talks to its own
origin, so a node needs no CORS: the registry's page links to each node's own console, where the
node's auth applies and a token typed in stays in that origin's ``sessionStorage``.

The files hold no data and are public (auth guards the API calls the page makes); they are served
with a strict Content-Security-Policy (only this origin; no inline script, no third-party CDN).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONSOLE_PATH", "console_routes", "is_console_path"]

CONSOLE_PATH = "/ui"
SECURITY_HEADERS: Mapping[str, str] = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",  # revalidated (ETag): a new version is picked up at once
}


def is_console_path(path: str) -> bool:
    """True for the console's own (public, data-free) paths."""
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


class _Secured:
    """Adds :data:`SECURITY_HEADERS` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secured)


def console_routes(role: Literal["registry", "node"], **config: Any) -> list[BaseRoute]:
    """``/ui`` (a redirect), ``/ui/config.json`` (``{"role": role, **config}``) and the files."""
    body = {"role": role, **config}

    async def settings(_: Request) -> Response:
        return JSONResponse(body, headers=dict(SECURITY_HEADERS))

    async def to_index(_: Request) -> Response:
        return RedirectResponse(CONSOLE_PATH + "/", status_code=308)

    files = StaticFiles(packages=[("node.console", "static")], html=True)
    return [
        Route(CONSOLE_PATH, to_index, methods=["GET", "HEAD"]),
        Route(CONSOLE_PATH + "/config.json", settings, methods=["GET"]),
        Mount(CONSOLE_PATH, app=_Secured(files)),
    ]
