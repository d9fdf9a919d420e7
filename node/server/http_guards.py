"""ASGI middleware guarding the HTTP edge: JSON-RPC content type and request-body size."""

from __future__ import annotations

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.utils.errors import ContentTypeNotSupportedError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

JSON_TYPES = ("application/json", "application/a2a+json")


class JsonRpcContentType:
    """Answer a JSON-RPC POST whose content type is not JSON with A2A error -32005."""

    def __init__(self, app: ASGIApp, rpc_path: str = "/") -> None:
        self.app = app
        self.rpc_path = rpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == self.rpc_path:
            content_type = Headers(scope=scope).get("content-type", "")
            if content_type.split(";")[0].strip().lower() not in JSON_TYPES:
                error = ContentTypeNotSupportedError(
                    f"content type {content_type or '(none)'!r} is not supported; "
                    "send application/json"
                )
                response = JSONResponse(build_error_response(None, error), status_code=200)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
