"""The agent-card route: the SDK's card endpoint (ETag, 304) with the serialized card cached.

The SDK's endpoint turns the card into JSON on every GET (``MessageToDict``, the 0.3 compat
fields, a sorted dump for the ETag: ~2-3 ms of CPU). Here that happens once per card content: the
cache is keyed on the card's deterministic protobuf bytes (~20 µs to compute), so a card rebuilt
because peers came or went is serialized again on its next GET, and the same card never is.
The answer is the SDK's own (body, ``ETag``, ``Cache-Control``, 304 on a matching
``If-None-Match``), built by its endpoint the first time a content is served
(``tests/server/test_agent_card.py`` compares both byte for byte), plus ``Last-Modified``: the
time the card's content (its ETag) last changed in this process.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate

from a2a.server.routes import create_agent_card_routes
from a2a.types import AgentCard
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


class _Served:
    """One card content as the SDK serves it: its JSON body and ETag, and since when."""

    __slots__ = ("body", "etag", "key", "last_modified")

    def __init__(self, key: bytes, body: bytes, etag: str, last_modified: str) -> None:
        self.key, self.body, self.etag, self.last_modified = key, body, etag, last_modified


def _hits(if_none_match: str, etag: str) -> bool:
    """Whether ``If-None-Match`` selects ``etag`` (weak comparison, ``*``), as the SDK decides."""
    tag = etag.removeprefix("W/")
    return any(
        candidate == "*" or candidate.removeprefix("W/") == tag
        for candidate in (c.strip() for c in if_none_match.split(","))
    )


def agent_card_route(
    card: AgentCard,
    modifier: Callable[[AgentCard], Awaitable[AgentCard]] | None,
    cache_s: int,
) -> Route:
    """``GET /.well-known/agent-card.json``: ``modifier(card)`` (if set) as the SDK serves it."""
    cache_control = f"public, max-age={cache_s}"

    async def current(_: AgentCard) -> AgentCard:  # the card the SDK endpoint serializes
        return served_card[0]

    served_card = [card]
    (inner,) = create_agent_card_routes(card, card_modifier=current, cache_control=cache_control)
    cached: list[_Served] = []

    async def serialize(request: Request, now: AgentCard, key: bytes) -> _Served:
        served_card[0] = now
        plain = Request({**request.scope, "headers": []}, request.receive)  # never a 304
        response: Response = await inner.endpoint(plain)  # type: ignore[misc]
        etag = response.headers["etag"]
        last = cached[0] if cached else None
        since = (
            last.last_modified
            if last is not None and last.etag == etag
            else formatdate(time.time(), usegmt=True)
        )
        return _Served(key, bytes(response.body), etag, since)

    async def endpoint(request: Request) -> Response:
        now = await modifier(card) if modifier is not None else card
        key = now.SerializeToString(deterministic=True)
        served = cached[0] if cached else None
        if served is None or served.key != key:
            served = await serialize(request, now, key)
            cached[:] = [served]
        headers = {"ETag": served.etag, "Cache-Control": cache_control}
        if_none_match = request.headers.get("if-none-match")
        if if_none_match and _hits(if_none_match, served.etag):
            response = Response(status_code=304, headers=headers)
        else:
            response = Response(served.body, headers=headers, media_type="application/json")
        response.headers["Last-Modified"] = served.last_modified
        return response

    return Route(inner.path, endpoint=endpoint, methods=["GET"])
