"""A2A 0.3 beside 1.0: the card entries that let 0.3 clients in.

Most A2A clients in use (a2a-sdk 0.3 and the frameworks built on it: strands-agents, beeai,
crewAI) speak 0.3 and refuse a card without its top-level ``url``. Serving them takes two things,
both from the a2a-sdk: ``enable_v0_3_compat=True`` on the JSON-RPC and REST route factories (0.3
methods such as ``message/send`` on the same JSON-RPC URL, 0.3 REST under ``<rest>/v1/...``; each
is converted to the 1.0 request and handled by the same request handler), and one 0.3
:class:`AgentInterface` per 1.0 JSON-RPC / HTTP+JSON interface, at the same URL, from which the
SDK's card route writes the 0.3 fields ``url``, ``preferredTransport``, ``protocolVersion`` and
``additionalInterfaces``. A 1.0 client still picks the 1.0 entry (the SDK prefers 1.0 at a URL).

The cost: the A2A 1.0 conformance kit's card-schema check refuses those extra top-level fields, so
a card setting (``server.a2a_v0_3: false`` on a node, ``a2a_v0_3=False`` for the registry) serves a
strict 1.0 card and no 0.3 methods.

The 0.3 REST routes come from :func:`v0_3_rest_routes` rather than the factory's flag: the SDK's
0.3 REST adapter starts an SSE stream before the handler has checked anything, so a refused
``/v1/message:stream`` (a bad id, a terminal task) or ``/v1/tasks/{id}:subscribe`` (no such task)
broke the stream instead of answering 4xx. Ours reads the first event before answering, as the
SDK's 1.0 REST does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

import a2a.server.routes  # noqa: F401 (first: the SDK's 0.3 REST adapter imports it circularly)
from a2a.compat.v0_3.rest_adapter import REST03Adapter
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import create_event_source_response
from a2a.types import AgentCard, AgentInterface
from a2a.utils import json_utils
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from a2a.utils.error_handlers import build_rest_error_payload, rest_stream_error_handler
from a2a.utils.errors import InvalidRequestError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.routing import Route

__all__ = ["V0_3_BINDINGS", "add_v0_3_interfaces", "v0_3_rest_routes"]

log = logging.getLogger(__name__)

V0_3_BINDINGS = ("JSONRPC", "HTTP+JSON")  # the bindings whose 0.3 form the node serves


def add_v0_3_interfaces(card: AgentCard) -> AgentCard:
    """Add a 0.3 copy of each 1.0 JSON-RPC and HTTP+JSON interface of ``card`` (in place).

    They go before any other 0.3 entry (gRPC's), so the first, which the 0.3 card's ``url`` and
    ``preferredTransport`` name, is JSON-RPC: the binding every 0.3 client speaks.
    """
    interfaces = list(card.supported_interfaces)
    legacy = [
        AgentInterface(
            url=interface.url,
            protocol_binding=interface.protocol_binding,
            protocol_version=PROTOCOL_VERSION_0_3,
            tenant=interface.tenant,
        )
        for interface in interfaces
        if interface.protocol_binding in V0_3_BINDINGS and interface.protocol_version == "1.0"
    ]
    at = next(
        (i for i, f in enumerate(interfaces) if is_legacy_version(f.protocol_version)),
        len(interfaces),
    )
    del card.supported_interfaces[:]
    card.supported_interfaces.extend([*interfaces[:at], *legacy, *interfaces[at:]])
    return card


class _PrimedREST03Adapter(REST03Adapter):
    """The SDK's 0.3 REST adapter; a stream refused before its first event answers HTTP 4xx."""

    @rest_stream_error_handler
    async def _handle_streaming_request(
        self,
        method: Callable[[Request, Any], AsyncIterable[Any]],
        request: Request,
    ) -> EventSourceResponse:
        try:
            await request.body()  # read now: it cannot be read once the stream has started
        except (ValueError, RuntimeError, OSError) as exc:
            raise InvalidRequestError(message=f"could not read the request body: {exc}") from exc
        stream = aiter(method(request, self._context_builder.build(request)))
        try:
            first = await anext(stream)  # refusals raise here, before any header is sent
        except StopAsyncIteration:
            first = None

        async def events() -> AsyncIterator[ServerSentEvent]:
            if first is None:
                return
            yield ServerSentEvent(data=json_utils.dumps(first))
            try:
                async for item in stream:
                    yield ServerSentEvent(data=json_utils.dumps(item))
            except Exception as exc:  # the stream has started: report it as its last event
                log.warning("0.3 REST stream ended by %s", type(exc).__name__)
                payload = build_rest_error_payload(exc)
                yield ServerSentEvent(data=json_utils.dumps(payload), event="error")

        return create_event_source_response(
            events(), shutdown_grace_period=self._shutdown_grace_period
        )


def v0_3_rest_routes(handler: RequestHandler) -> list[Route]:
    """The 0.3 REST routes (``/v1/message:send`` ...) for ``handler``; mount them with the 1.0
    routes (``create_rest_routes(handler)``), before them."""
    adapter = _PrimedREST03Adapter(http_handler=handler)
    return [
        Route(path, endpoint=endpoint, methods=[method])
        for (path, method), endpoint in adapter.routes().items()
    ]
