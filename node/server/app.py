"""The node's app factory: a2a-sdk routes + card + health, wrapped in auth and edge guards.

    build_node_app(card) -> Starlette

Nothing happens at import time; the app's lifespan opens a :class:`~node.server.runtime.NodeRuntime`
(the outbound ``httpx.AsyncClient``, the task store, peer discovery, registry heartbeats) on an
``AsyncExitStack`` that closes everything on shutdown.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.types import AgentCard
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route, Router

from node.card import NodeCard
from node.console.routes import console_routes
from node.executor import ExecutorSettings, NodeExecutor, NodeServices
from node.mcp.endpoint import MCP_PATH, mcp_endpoint_for
from node.observability.metrics import NodeMetrics, metrics_route
from node.observability.tracing import TraceContextMiddleware
from node.server import sdk_tuning
from node.server.agent_card import REST_PREFIX, build_agent_card
from node.server.assembly import NodeTools, assemble_tools
from node.server.auth import CredentialBackend, on_auth_error
from node.server.card_route import agent_card_route
from node.server.grpc_binding import GrpcBinding, grpc_address
from node.server.heap import freeze_startup_heap
from node.server.http_guards import BodyGuard
from node.server.lean_path import lean_path_enabled
from node.server.push import NodePush, build_push
from node.server.request_handler import NodeRequestHandler
from node.server.runtime import NodeRuntime
from node.server.v0_3 import v0_3_rest_routes
from node.store.cluster import Cluster, cluster_for
from node.store.factory import open_task_store
from node.tooling import Tool
from node.urls import http_url


@dataclass(slots=True)
class NodeState:
    """A node's app and, once its lifespan has started, its runtime: ``app.state.node``."""

    card: NodeCard
    public_url: str
    data_dir: Path
    tools: NodeTools
    runtime: NodeRuntime | None = None
    grpc: GrpcBinding | None = None  # when the card sets server.grpc_port
    push: NodePush | None = None  # unless the card sets push.enabled: false
    cluster: Cluster | None = None  # versioned store and event stream (SQL stores)
    handler: NodeRequestHandler | None = None
    metrics: NodeMetrics | None = None  # unless the card sets server.metrics: false

    @property
    def ready(self) -> bool:
        return self.runtime is not None and self.runtime.ready


def default_public_url(card: NodeCard) -> str:
    return http_url(card.server.host, card.server.port)


def build_node_app(
    card: NodeCard,
    *,
    public_url: str | None = None,
    data_dir: Path | str | None = None,
    store: str | None = None,
    tools: Iterable[Tool] = (),
) -> Starlette:
    """Build a node's ASGI app from its card; ``tools`` adds tools defined in Python.

    Only the workspace folder is created here; everything else waits for the lifespan.
    """
    sdk_tuning.apply()  # once per process: the SDK's validator cache, no no-op telemetry wrappers
    public_url = (public_url or card.server.public_url or default_public_url(card)).rstrip("/")
    data_dir = Path(data_dir or card.server.data_dir)
    node_tools = assemble_tools(card, data_dir, tools)
    state = NodeState(card=card, public_url=public_url, data_dir=data_dir, tools=node_tools)

    built: dict[str, object] = {}
    grpc: GrpcBinding | None = None

    def current_card() -> AgentCard:
        """The card for the current skills, rebuilt when the tools or the gRPC port changed."""
        key = (node_tools.revision, grpc.port if grpc else None)
        if "card" not in built or built["for"] != key:
            address = grpc_address(public_url, grpc.port) if grpc else None
            built.update(
                {
                    "for": key,
                    "card": build_agent_card(
                        card,
                        node_tools.skill_specs(),
                        public_url,
                        grpc_address=address,
                        grpc_v0_3=card.server.a2a_v0_3,
                    ),
                }
            )
        agent_card = built["card"]
        assert isinstance(agent_card, AgentCard)
        return agent_card

    metrics = state.metrics = _metrics(card, node_tools)
    services = NodeServices(
        workspace=node_tools.workspace, url_guard=node_tools.url_guard, metrics=metrics
    )
    executor = NodeExecutor(
        node_tools.catalog,
        node_tools.skills,
        ExecutorSettings(
            agent_id=card.id,
            max_hops=card.peers.max_hops,
            max_calls_per_task=card.limits.max_calls_per_task,
            task_cost_budget=card.limits.task_cost_budget,
            anonymous_capabilities=frozenset(card.auth.anonymous_capabilities),
            planner=card.planner,
            routing=card.routing,
            services=services,
        ),
    )
    task_store = open_task_store(store or card.server.store, data_dir)
    push = state.push = build_push(card, task_store)  # configs beside the tasks
    retention = card.server.task_retention_days
    cluster = state.cluster = cluster_for(  # versioned writes, cross-replica events (SQL stores)
        task_store, task_retention_s=None if retention is None else retention * 86400
    )
    handler = NodeRequestHandler(
        agent_executor=executor,
        task_store=task_store if cluster is None else cluster.store,
        event_stream=None if cluster is None else cluster.stream,
        agent_card=current_card(),
        interrupted_task_timeout=card.limits.interrupted_task_timeout_s,
        send_window_s=card.limits.send_window_s,
        lean_path=lean_path_enabled(card.server.lean_path),
        **(push.handler_kwargs() if push is not None else {}),
    )

    state.handler = handler
    if cluster is not None:  # a cancel through another replica stops the task here
        cluster.on_cancel(handler.stop_canceled)

    if card.server.grpc_port is not None:
        grpc = state.grpc = GrpcBinding(
            handler,
            host=card.server.host,
            port=card.server.grpc_port,
            auth=card.auth,
            max_message_bytes=card.limits.max_body_bytes,
            v0_3=card.server.a2a_v0_3,
        )

    mcp = mcp_endpoint_for(card, handler, node_tools.skills, public_url)  # /mcp, when enabled

    async def card_now(_: AgentCard) -> AgentCard:
        return current_card()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[Mapping[str, object]]:
        async with contextlib.AsyncExitStack() as stack:
            runtime = await NodeRuntime.open(stack, card, public_url, task_store, node_tools.peers)
            if cluster is not None:  # closes after the handler's tasks have ended
                await cluster.start()
                stack.push_async_callback(cluster.aclose)
            if push is not None:  # the dispatcher closes after the handler's tasks have ended
                await push.open(stack)
            node_tools.mcp.start()  # one supervisor task per MCP server; nothing waits for them
            stack.push_async_callback(node_tools.mcp.aclose)
            stack.push_async_callback(handler.aclose)  # running tasks end before what they use
            if cluster is not None:  # SIGTERM: running tasks may finish first (a grace period)
                stack.push_async_callback(cluster.drain)
            if grpc is not None:
                await grpc.start()  # on this loop; stops taking calls before the handler closes
                stack.push_async_callback(grpc.stop)
            if mcp is not None:  # MCP sessions end before the handler closes
                await stack.enter_async_context(mcp.open())
            services.http = runtime.http
            if metrics is not None:  # read when scraped: breakers per peer, push deliveries
                metrics.watch_peers(runtime.peers.breaker_states)
                if push is not None:
                    metrics.watch_push(push.dispatcher.stats)
            state.runtime = runtime
            runtime.ready = True
            freeze_startup_heap()  # short full GC pauses from here on (node.server.heap)
            try:
                yield {}
            finally:
                runtime.ready = False

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "agent_id": card.id})

    async def readyz(_: Request) -> JSONResponse:
        ready = state.ready
        body: dict[str, object] = {"ready": ready, "agent_id": card.id}
        if node_tools.mcp.links:  # informative: a server that is down never makes the node unready
            body["mcp_servers"] = node_tools.mcp.states()
        return JSONResponse(body, status_code=200 if ready else 503)

    v0_3 = card.server.a2a_v0_3  # A2A 0.3 beside 1.0 (node.server.v0_3)
    app = Starlette(
        routes=[
            agent_card_route(current_card(), card_now, card.server.card_cache_s),
            *console_routes("node", agent_id=card.id, rest=REST_PREFIX),  # /ui: this node
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            *([metrics_route(metrics)] if metrics is not None else []),
            *([Route(MCP_PATH, mcp)] if mcp is not None else []),
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=v0_3),
            Mount(
                REST_PREFIX,
                app=Router(
                    [*(v0_3_rest_routes(handler) if v0_3 else []), *create_rest_routes(handler)],
                    redirect_slashes=False,
                ),
            ),
        ],
        middleware=_middleware(card),
        lifespan=lifespan,
    )
    app.router.redirect_slashes = False  # an unknown path is 404, not a redirect
    app.state.node = state
    return app


def _metrics(card: NodeCard, tools: NodeTools) -> NodeMetrics | None:
    """The node's metrics (labels: its skills and its catalog's tools), or None when off."""
    if not card.server.metrics:
        return None
    return NodeMetrics(
        is_skill=lambda name: name in tools.skills(), is_tool=tools.catalog.__contains__
    )


def _middleware(card: NodeCard) -> list[Middleware]:
    """Trace context, body size limit, then authentication (when on), then the JSON edge guard."""
    middleware = [
        Middleware(TraceContextMiddleware),  # a traceparent continued; a span when tracing is on
        Middleware(RequestBodyLimitMiddleware, max_body_size=card.limits.max_body_bytes),
    ]
    if card.auth.enabled:
        middleware.append(
            Middleware(
                AuthenticationMiddleware,
                backend=CredentialBackend(card.auth),
                on_error=on_auth_error,
            )
        )
    middleware.append(Middleware(BodyGuard, rpc_path="/", rest_prefix=REST_PREFIX))
    return middleware
