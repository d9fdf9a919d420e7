"""Build the registry's Starlette app and serve it with uvicorn.

    build_registry_app(settings) -> Starlette

As for a node (:mod:`node.server.runtime`), the lifespan opens a :class:`RegistryRuntime` (the
card-fetching ``httpx.AsyncClient``, the agent store and its index, the eviction sweeper) on an
``AsyncExitStack`` that closes it in reverse order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import uuid4

import httpx
import uvicorn
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Router

from node.card import AuthSettings, Credential
from node.console.routes import console_routes
from node.errors import RegistryError
from node.observability.metrics import RegistryMetrics, metrics_route
from node.registry.agent import A2A_PATH, A2A_REST_PATH, FindAgentsExecutor, registry_card
from node.registry.api import api_routes
from node.registry.errors import (
    BodyTooLarge,
    MethodNotAllowed,
    NoRoute,
    error_body,
    error_response,
)
from node.registry.federation import Federation
from node.registry.gate import Gate
from node.registry.heartbeat_protocol import heartbeat_protocol
from node.registry.heartbeat_route import HeartbeatAnswers, HeartbeatRoute
from node.registry.service import Clock, Registry
from node.registry.settings import RegistrySettings
from node.registry.store import AgentStore
from node.server.grpc_binding import GrpcBinding
from node.server.http_guards import BodyGuard
from node.server.serve import make_server
from node.server.v0_3 import v0_3_rest_routes

log = logging.getLogger(__name__)


@dataclass(slots=True)
class RegistryRuntime:
    """The live objects of a started registry."""

    http: httpx.AsyncClient  # fetches the cards agents register
    sweeper: asyncio.Task[None]  # evicts silent agents

    @classmethod
    async def open(
        cls,
        stack: contextlib.AsyncExitStack,
        registry: Registry,
        store: AgentStore,
        http: httpx.AsyncClient | None = None,
    ) -> RegistryRuntime:
        """Open the store, load the index and start sweeping; ``stack`` closes it all on exit.

        ``http`` is used as given (its owner closes it); otherwise one is created and closed here.
        """
        if http is None:
            http = await stack.enter_async_context(httpx.AsyncClient())
        await store.open()
        stack.push_async_callback(store.close)
        await registry.start()
        stack.push_async_callback(registry.aclose)  # before store.close: flushes heartbeats
        sweeper = asyncio.create_task(_sweep_forever(registry))
        stack.push_async_callback(_cancel, sweeper)
        return cls(http=http, sweeper=sweeper)


def build_registry_app(
    settings: RegistrySettings,
    *,
    clock: Clock = time.time,
    http_client: httpx.AsyncClient | None = None,
) -> Starlette:
    """The registry service as an ASGI app; its lifespan opens a :class:`RegistryRuntime`.

    ``clock`` (seconds) drives heartbeats and TTLs; ``http_client`` (used to fetch cards) is
    created by the lifespan when not given. ``app.state.registry`` is the :class:`Registry`.
    """
    store = AgentStore(settings.db_url)
    runtime: RegistryRuntime | None = None

    def http() -> httpx.AsyncClient:
        if runtime is None:
            raise RuntimeError("the registry is not running (its lifespan has not started)")
        return runtime.http

    registry = Registry(settings, store, http, clock)

    async def count_health() -> None:  # at each scrape: write the queued heartbeats, then count
        await registry.flush()
        await registry.refresh_health()

    metrics = RegistryMetrics(registry.health_counts, count_health) if settings.metrics else None
    federation = Federation(settings.federation, http, settings.allow_cidrs)
    card = registry_card(settings)
    handler = DefaultRequestHandler(
        agent_executor=FindAgentsExecutor(registry, federation),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    grpc = _grpc_binding(settings, handler)
    grpc_card: dict[int, AgentCard] = {}

    async def card_now(served: AgentCard) -> AgentCard:
        """The card with the gRPC binding once it is bound (its port may be picked at start)."""
        if grpc is None or not grpc.started:
            return served
        if grpc.port not in grpc_card:
            grpc_card.clear()
            grpc_card[grpc.port] = registry_card(settings, grpc.port)
        return grpc_card[grpc.port]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal runtime
        try:
            async with contextlib.AsyncExitStack() as stack:
                runtime = await RegistryRuntime.open(stack, registry, store, http_client)
                stack.push_async_callback(handler.aclose)
                if grpc is not None:  # stops taking calls before the handler closes
                    await grpc.start()
                    stack.push_async_callback(grpc.stop)
                yield
        finally:
            runtime = None

    v0_3 = settings.a2a_v0_3  # A2A 0.3 beside 1.0 (node.server.v0_3)
    answers = HeartbeatAnswers(registry, settings, metrics)
    app = Starlette(
        routes=[
            *api_routes(registry, federation, metrics),
            *([metrics_route(metrics)] if metrics is not None else []),
            *console_routes("registry", refresh_ms=_refresh_ms(settings)),  # /ui: the network
            *create_agent_card_routes(card, card_modifier=card_now),
            *create_jsonrpc_routes(handler, rpc_url=A2A_PATH, enable_v0_3_compat=v0_3),
            Mount(
                A2A_REST_PATH,
                app=Router(
                    [*(v0_3_rest_routes(handler) if v0_3 else []), *create_rest_routes(handler)],
                    redirect_slashes=False,
                ),
            ),
        ],
        middleware=[
            # PUT /v1/agents/{id}/heartbeat, the hot path, answered before the rest (same gate)
            Middleware(HeartbeatRoute, answers=answers),
            Middleware(Gate, settings=settings),
            Middleware(RequestBodyLimitMiddleware, max_body_size=settings.max_body_bytes),
            # The node's edge guard for the A2A bindings: bad JSON, invalid UTF-8, deep nesting
            # and non-finite numbers get JSON-RPC / REST errors before the SDK parses the body.
            Middleware(BodyGuard, rpc_path=A2A_PATH, rest_prefix=A2A_REST_PATH),
        ],
        exception_handlers={
            RegistryError: _registry_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # /v1/agents/ is a 404, not a 307 to /v1/agents
    app.state.registry = registry
    app.state.federation = federation
    app.state.heartbeats = answers  # for the serving protocol (registry_server)
    return app


def _refresh_ms(settings: RegistrySettings) -> int:
    """How often the console reloads the agents: a quarter of the TTL, within 0.5–5 s."""
    return int(min(5000.0, max(500.0, settings.ttl_s * 250)))


def _grpc_binding(settings: RegistrySettings, handler: DefaultRequestHandler) -> GrpcBinding | None:
    """The A2A endpoint over gRPC, with the HTTP gate's read tokens (when reads need one)."""
    if settings.grpc_port is None:
        return None
    tokens = [settings.token, settings.read_token] if settings.read_token_required else []
    auth = AuthSettings.model_construct(  # the registry's tokens need not be 8 characters
        bearer_tokens=[
            Credential.model_construct(secret=t, principal="registry-reader", capabilities=[])
            for t in tokens
            if t is not None
        ]
    )
    return GrpcBinding(
        handler,
        host=settings.host,
        port=settings.grpc_port,
        auth=auth,
        max_message_bytes=settings.max_body_bytes,
        v0_3=settings.a2a_v0_3,
    )


async def serve_registry(
    settings: RegistrySettings,
    *,
    sock: socket.socket | None = None,
    clock: Clock = time.time,
    log_level: str = "info",
) -> None:
    """Run the registry with uvicorn until it is told to stop (Ctrl-C or SIGTERM)."""
    app = build_registry_app(settings, clock=clock)
    server = registry_server(app, settings.host, settings.port, log_level=log_level)
    await server.serve(sockets=[sock] if sock else None)


def registry_server(
    app: Starlette, host: str, port: int, *, log_level: str = "warning"
) -> uvicorn.Server:
    """uvicorn serving ``app`` (made by :func:`build_registry_app`) as :func:`serve_app` serves
    a node, with :class:`HeartbeatProtocol` (:mod:`node.registry.heartbeat_protocol`) as its HTTP
    protocol: heartbeats of remembered agents answered without an ASGI call."""
    server = make_server(app, host, port, log_level=log_level)
    server.config.http = heartbeat_protocol(app.state.heartbeats)
    return server


def run_registry(settings: RegistrySettings) -> None:
    """:func:`serve_registry` on uvloop when it is installed (its heartbeats cost tens of µs
    each, where the loop's own cost shows; nodes serve on asyncio for its fairer tail, see
    ``a2a-node serve --loop``), else on asyncio's loop."""
    try:
        from uvloop import new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        new_event_loop = None  # type: ignore[assignment]
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(serve_registry(settings))


async def _sweep_forever(registry: Registry) -> None:
    while True:
        await asyncio.sleep(registry.settings.sweep_interval)
        try:
            await registry.sweep()
        except RegistryError as exc:
            log.warning("eviction sweep failed: %s", exc)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _registry_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RegistryError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path[:200]!r}"
    if exc.status_code == 413:
        return error_response(BodyTooLarge(f"request body is larger than the limit: {exc.detail}"))
    if exc.status_code == 404:
        return error_response(NoRoute(f"no route for {where}; see /v1/openapi.json"))
    if exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        response = error_response(MethodNotAllowed(f"{where} is not allowed; allowed: {allowed}"))
        if allowed:
            response.headers["Allow"] = allowed
        return response
    body = error_body(f"http_{exc.status_code}", str(exc.detail))
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    """A bug: the client gets an error id, the log gets the traceback (uvicorn logs it too)."""
    error_id = uuid4().hex[:12]
    log.error("internal error %s on %s %s", error_id, request.method, request.url.path[:200])
    body = error_body("internal", f"internal error {error_id}; the registry log has the details")
    return JSONResponse(body, status_code=500)
