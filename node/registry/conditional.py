"""Conditional GET for listings: a strong ETag over the exact body, ``If-None-Match`` → 304.

The tag hashes the bytes served, so it changes whenever anything in the page does (an entry's
health and ``expires_at`` included). A client that sends back the tag of the page it holds gets
``304 Not Modified`` with no body when nothing changed (RFC 9110 §13.1.2: weak comparison).
"""

from __future__ import annotations

import hashlib

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["conditional_response", "etag", "matches"]


def etag(body: bytes) -> str:
    """A strong entity tag for ``body`` (128 bits of BLAKE2b, quoted)."""
    return f'"{hashlib.blake2b(body, digest_size=16).hexdigest()}"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """True when an ``If-None-Match`` value names ``tag`` (or is ``*``)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    opaque = tag.removeprefix("W/")
    return any(t.strip().removeprefix("W/") == opaque for t in if_none_match.split(","))


def conditional_response(request: Request, body: bytes, media_type: str) -> Response:
    """``body`` with its ETag, or a bodiless 304 when the request already holds it."""
    tag = etag(body)
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if matches(request.headers.get("if-none-match"), tag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)
