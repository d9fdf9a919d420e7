"""Conditional GET for listings: a weak ETag over what a page means, ``If-None-Match`` → 304.

The tag hashes the bytes served minus every entry's heartbeat times (``last_heartbeat``,
``expires_at``), so it changes when an agent comes or goes, its card, skills or health change,
but not at each heartbeat: a node polling every few seconds gets ``304 Not Modified`` while its
peers merely stay alive (a strong tag over the whole body changed at nearly every poll). It is a
weak validator (``W/``, RFC 9110 §8.8.1) because two pages with the same tag may differ in those
times; a client holding one is told nothing it would act on changed.
"""

from __future__ import annotations

import hashlib
import re

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["conditional_response", "etag", "matches"]


_HEARTBEAT_TIMES = re.compile(rb'"(?:last_heartbeat|expires_at)":"[^"]*"')


def etag(body: bytes) -> str:
    """A weak entity tag for ``body``: 128 bits of BLAKE2b over it minus the heartbeat times."""
    meaning = _HEARTBEAT_TIMES.sub(b"", body)
    return f'W/"{hashlib.blake2b(meaning, digest_size=16).hexdigest()}"'


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
