"""The agent-card route: the SDK's endpoint (ETag, 304) plus ``Last-Modified``.

``Last-Modified`` is the time the card's content (its ETag) last changed in this process, so a
node whose peers' exposed skills change publishes a new date.
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


def agent_card_route(
    card: AgentCard,
    modifier: Callable[[AgentCard], Awaitable[AgentCard]] | None,
    cache_s: int,
) -> Route:
    (inner,) = create_agent_card_routes(
        card, card_modifier=modifier, cache_control=f"public, max-age={cache_s}"
    )
    last = ["", ""]  # [etag, Last-Modified]

    async def endpoint(request: Request) -> Response:
        response: Response = await inner.endpoint(request)  # type: ignore[misc]
        etag = response.headers.get("etag", "")
        if etag != last[0]:
            last[:] = [etag, formatdate(time.time(), usegmt=True)]
        response.headers["Last-Modified"] = last[1]
        return response

    return Route(inner.path, endpoint=endpoint, methods=["GET"])
