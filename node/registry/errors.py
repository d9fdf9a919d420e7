"""Registry errors and the one table that maps them to HTTP statuses and wire codes.

All derive from :class:`node.errors.RegistryError`::

    RegistryError
    ├── BadRequest         malformed JSON, a missing or invalid field or query parameter
    │   └── InvalidUrl     card_url is not an absolute http(s) URL
    ├── Unauthorized       no bearer token where one is required
    ├── Forbidden          a bearer token that does not match
    ├── AgentNotFound      no agent with that id
    │   └── UnreadableEntry  stored, but the entry cannot be read or served (see /healthz)
    ├── NoRoute            no such path
    ├── MethodNotAllowed   the path exists, the method does not
    ├── Conflict           the agent id is already registered from another card URL
    ├── BodyTooLarge       the request body is over the limit
    ├── UnsupportedMediaType  a request body that is not application/json
    ├── Busy               every card-fetch slot stayed taken (503, Retry-After)
    │   └── HostBusy       every slot for the card's host stayed taken (429, Retry-After)
    └── CardError          the card could not be used (nothing is stored)
        ├── UrlRefused     the card URL resolves to an address the SSRF guard refuses
        ├── CardUnreachable
        ├── CardTooLarge
        └── InvalidCard    not JSON, not an AgentCard, or missing required fields
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from node.errors import RegistryError


class BadRequest(RegistryError):
    """The request itself is malformed."""


class InvalidUrl(BadRequest):
    """The card URL is not an absolute http(s) URL."""


class Unauthorized(RegistryError):
    """A bearer token is required and none was sent."""


class Forbidden(RegistryError):
    """The bearer token sent does not match."""


class AgentNotFound(RegistryError):
    """No registered agent has that id."""


class UnreadableEntry(AgentNotFound):
    """A stored entry that cannot be read or served; it is left out of every listing."""


class NoRoute(RegistryError):
    """No route has that path."""


class MethodNotAllowed(RegistryError):
    """The path exists but not with that method."""


class UnsupportedMediaType(RegistryError):
    """The request body is declared as something other than JSON."""


class Conflict(RegistryError):
    """The agent id is already registered from another card URL."""


class BodyTooLarge(RegistryError):
    """The request body is larger than the configured limit."""


class Busy(RegistryError):
    """Every card-fetch slot stayed taken for the bounded wait; retry after ``retry_after_s``."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class HostBusy(Busy):
    """Every card-fetch slot for this card's host stayed taken for the bounded wait."""


class CardError(RegistryError):
    """The agent card could not be fetched or used."""


class UrlRefused(CardError):
    """The SSRF guard refused the card URL's address."""


class CardUnreachable(CardError):
    """The card URL did not answer with a card."""


class CardTooLarge(CardError):
    """The card is larger than the configured limit."""


class InvalidCard(CardError):
    """The fetched document is not a valid agent card."""


#: Every registry error → (HTTP status, wire code). The only place statuses are chosen.
ERROR_TABLE: dict[type[RegistryError], tuple[int, str]] = {
    RegistryError: (500, "internal"),
    BadRequest: (400, "bad_request"),
    InvalidUrl: (400, "invalid_url"),
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    AgentNotFound: (404, "not_found"),
    UnreadableEntry: (404, "unreadable_entry"),
    NoRoute: (404, "no_route"),
    MethodNotAllowed: (405, "method_not_allowed"),
    Conflict: (409, "conflict"),
    BodyTooLarge: (413, "body_too_large"),
    UnsupportedMediaType: (415, "unsupported_media_type"),
    Busy: (503, "busy"),
    HostBusy: (429, "host_busy"),
    CardError: (422, "card_error"),
    UrlRefused: (422, "url_refused"),
    CardUnreachable: (422, "card_unreachable"),
    CardTooLarge: (422, "card_too_large"),
    InvalidCard: (422, "invalid_card"),
}


def status_and_code(exc: RegistryError) -> tuple[int, str]:
    """The HTTP status and wire code for ``exc`` (its nearest class in :data:`ERROR_TABLE`)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]  # type: ignore[index]
    return ERROR_TABLE[RegistryError]


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON body of every error response."""
    return {"error": {"code": code, "message": message}}


def error_response(exc: RegistryError) -> JSONResponse:
    """The JSON error response for ``exc``."""
    status, code = status_and_code(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, Busy):
        headers = {"Retry-After": str(exc.retry_after_s)}
    return JSONResponse(error_body(code, str(exc)), status_code=status, headers=headers)
