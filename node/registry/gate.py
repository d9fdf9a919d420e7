"""The ASGI gate in front of every route: declared body size, then bearer tokens.

Writes (any non-GET method under ``/v1/``) need the write token when one is set; everything else
except the public paths needs a read token when ``read_token_required``. Tokens are compared with
:func:`hmac.compare_digest` and never logged. Bodies streamed without a Content-Length are bounded
by Starlette's ``RequestBodyLimitMiddleware`` further in.
"""

from __future__ import annotations

import hmac

from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from pydantic import SecretStr
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from node.console.routes import is_console_path
from node.errors import RegistryError
from node.registry.errors import (
    BodyTooLarge,
    Forbidden,
    Unauthorized,
    error_response,
)
from node.registry.settings import RegistrySettings

PUBLIC_PATHS = frozenset({"/healthz", "/v1/openapi.json", AGENT_CARD_WELL_KNOWN_PATH})
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class Gate:
    """Refuse oversized bodies (by Content-Length) and missing or wrong bearer tokens."""

    def __init__(self, app: ASGIApp, settings: RegistrySettings) -> None:
        self.app = app
        self.max_body = settings.max_body_bytes
        self.write_tokens = _encode(settings.token)
        self.read_tokens = (
            _encode(settings.token, settings.read_token) if settings.read_token_required else []
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            self.check(scope, headers)
        except RegistryError as exc:
            await error_response(exc)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, scope: Scope, headers: Headers) -> None:
        """Raise :class:`BodyTooLarge`, :class:`Unauthorized` or :class:`Forbidden`, or pass."""
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_body:
            raise BodyTooLarge(f"request body is larger than {self.max_body} bytes")
        path: str = scope["path"]
        if path in PUBLIC_PATHS or is_console_path(path):  # the console's data-free files
            return
        is_write = scope["method"] not in READ_METHODS and path.startswith("/v1/")
        tokens = self.write_tokens if is_write else self.read_tokens
        if tokens:
            _require(headers.get("authorization"), tokens)


def _encode(*tokens: SecretStr | None) -> list[bytes]:
    return [t.get_secret_value().encode() for t in tokens if t is not None]


def _require(header: str | None, tokens: list[bytes]) -> None:
    scheme, _, value = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("a bearer token is required (Authorization: Bearer <token>)")
    given = value.strip().encode()
    matches = [hmac.compare_digest(given, token) for token in tokens]  # all of them, no short cut
    if not any(matches):
        raise Forbidden("the bearer token is not valid for this request")
