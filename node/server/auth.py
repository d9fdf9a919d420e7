"""Authentication: API keys and bearer tokens from the card, each mapped to a principal.

A :class:`CredentialBackend` plugs into Starlette's ``AuthenticationMiddleware``. The principal
becomes the request user (the a2a-sdk scopes tasks to ``user.display_name``, so another
principal's task is "not found"), and its capabilities become the request's auth scopes.
Secrets are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
    SimpleUser,
)
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response

from node.card import AuthSettings, Credential
from node.console.routes import is_console_path

PUBLIC_PATHS = frozenset({"/.well-known/agent-card.json", "/healthz", "/readyz"})


def _find(secret: str, credentials: Iterable[Credential]) -> Credential | None:
    found = None
    for cred in credentials:  # no early exit: the time taken does not depend on which one matched
        if hmac.compare_digest(secret.encode(), cred.secret.get_secret_value().encode()):
            found = cred
    return found


def authenticate(settings: AuthSettings, authorization: str, api_key: str) -> Credential:
    """The credential that an ``Authorization`` value or an API key names, on any binding.

    Raises ``AuthenticationError`` saying what is missing or wrong.
    """
    cred: Credential | None = None
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("malformed Authorization header; expected 'Bearer <token>'")
        cred = _find(token.strip(), settings.bearer_tokens)
    elif api_key:
        cred = _find(api_key, settings.api_keys)
    else:
        raise AuthenticationError("credentials required")
    if cred is None:
        raise AuthenticationError("invalid credentials")
    return cred


def identity(cred: Credential) -> tuple[AuthCredentials, SimpleUser]:
    """What a request authenticated by ``cred`` carries: its capabilities and its principal."""
    return AuthCredentials(cred.capabilities), SimpleUser(cred.principal)


class CredentialBackend(AuthenticationBackend):
    """Authenticate every request except the public paths when auth is enabled."""

    def __init__(self, settings: AuthSettings) -> None:
        self._settings = settings

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if conn.url.path in PUBLIC_PATHS or is_console_path(conn.url.path):  # data-free files
            return None
        headers = conn.headers
        return identity(
            authenticate(
                self._settings,
                headers.get("authorization", ""),
                headers.get(self._settings.api_key_header, ""),
            )
        )


def on_auth_error(conn: HTTPConnection, exc: Exception) -> Response:
    """401 with a JSON reason and the schemes the node accepts."""
    return JSONResponse(
        {"error": {"code": 401, "message": f"unauthorized: {exc}"}},
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="a2a-node"'},
    )
