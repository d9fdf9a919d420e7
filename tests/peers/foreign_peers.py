"""Peers that are not a2a-node: plain a2a-sdk 1.3 servers with no skill-schema extension.

Built the way a user of the SDK builds one: ``DefaultRequestHandler`` over a tiny
:class:`PlainAgent` and the SDK's route factories (JSON-RPC at ``/``, HTTP+JSON under ``/rest``,
optionally with ``enable_v0_3_compat``), or the SDK's ``GrpcHandler`` on a ``grpc.aio`` server.
``PlainAgent`` knows nothing of skills or metadata; how it answers is set per server:

- ``"message"``: a direct Message: ``hello, <text>`` (plus ``{"received": data}`` when a data
  part came);
- ``"task"``: a Task with one text artifact ``report: <text>``; text starting with ``fail`` fails
  the task with the status message ``cannot do: <text>``; text starting with ``slow`` keeps the
  task working until it is cancelled (at most 10 s);
- ``"status"``: a Task completed with only a status message ``done: <text>`` (no artifact).

Every request is recorded in a :class:`Seen`: the message parts, and for each HTTP request its
path and ``A2A-Version`` header, for each gRPC call its metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.helpers import new_data_part, new_message, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.grpc_handler import (
    DefaultGrpcServerCallContextBuilder,
    GrpcHandler,
)
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, a2a_pb2_grpc
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers import free_socket, running, url_of

Answer = Literal["message", "task", "status"]
ECHO = AgentSkill(
    id="echo",
    name="Echo",
    description="Answers what it was told",
    tags=["text"],
    examples=["say hello"],
)


@dataclass
class Seen:
    """What a plain peer received."""

    parts: list[list[dict[str, Any]]] = field(default_factory=list)
    http: list[tuple[str, str | None]] = field(default_factory=list)  # (path, A2A-Version)
    grpc_metadata: list[dict[str, str]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)  # ids of the tasks cancelled


class PlainAgent(AgentExecutor):
    """The smallest useful AgentExecutor: no skills, no metadata, one way of answering."""

    def __init__(self, answer: Answer, seen: Seen) -> None:
        self.answer, self.seen = answer, seen
        self.cancelled: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        self.seen.parts.append([json_format.MessageToDict(p) for p in message.parts])
        text = "\n".join(p.text for p in message.parts if p.HasField("text"))
        data = [json_format.MessageToDict(p.data) for p in message.parts if p.HasField("data")]
        if self.answer == "message":
            parts = [new_text_part(f"hello, {text}")]
            if data:
                parts.append(new_data_part({"received": data[0]}))
            await event_queue.enqueue_event(new_message(parts, context_id=context.context_id))
            return
        task = context.current_task or new_task_from_user_message(message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        if text.startswith("slow"):
            cancelled = self.cancelled.setdefault(task.id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cancelled.wait(), 10.0)
        elif text.startswith("fail"):
            await up.failed(up.new_agent_message([new_text_part(f"cannot do: {text}")]))
        elif self.answer == "status":
            await up.complete(up.new_agent_message([new_text_part(f"done: {text}")]))
        else:
            await up.add_artifact([new_text_part(f"report: {text}")], name="report")
            await up.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        self.seen.cancels.append(context.task_id)
        self.cancelled.setdefault(context.task_id, asyncio.Event()).set()
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def plain_card(
    name: str, interfaces: list[tuple[str, str]], *, version: str = "1.0", streaming: bool = True
) -> AgentCard:
    """A card with no a2a-node extension; ``interfaces`` are ``(binding, url)`` in preference
    order, each declaring protocol ``version``."""
    return AgentCard(
        name=name,
        description=f"{name}, a plain a2a-sdk server",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding=b, url=u, protocol_version=version)
            for b, u in interfaces
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[ECHO],
    )


def v03_card_json(card: AgentCard) -> dict[str, Any]:
    """``card`` as an a2a-sdk 0.3 server serves it (converted by the SDK's compat layer)."""
    legacy = to_compat_agent_card(card)
    return legacy.model_dump(mode="json", by_alias=True, exclude_none=True)


def handler_for(card: AgentCard, answer: Answer, seen: Seen) -> DefaultRequestHandler:
    return DefaultRequestHandler(
        agent_executor=PlainAgent(answer, seen), task_store=InMemoryTaskStore(), agent_card=card
    )


class _RecordHttp:
    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            self.seen.http.append((scope["path"], headers.get("a2a-version")))
        await self.app(scope, receive, send)


def plain_http_app(
    card: AgentCard,
    handler: DefaultRequestHandler,
    seen: Seen,
    *,
    v03: bool = False,
    card_json: dict[str, Any] | None = None,
) -> ASGIApp:
    """The SDK's routes for ``handler``; ``card_json`` replaces the served card document."""
    if card_json is None:
        card_routes = create_agent_card_routes(card)
    else:
        document = card_json

        async def serve_card(_: Request) -> JSONResponse:
            return JSONResponse(document)

        card_routes = [Route("/.well-known/agent-card.json", serve_card)]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            *card_routes,
            *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=v03),
            Mount("/rest", routes=create_rest_routes(handler, enable_v0_3_compat=v03)),
        ],
    )
    return _RecordHttp(app, seen)


def card_only_app(card: AgentCard) -> Starlette:
    """Only the card route (the gRPC-only peer publishes its card over HTTP)."""
    return Starlette(routes=create_agent_card_routes(card))


class _RecordMetadata(DefaultGrpcServerCallContextBuilder):
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        metadata = context.invocation_metadata() or ()
        self.seen.grpc_metadata.append(
            {k: v if isinstance(v, str) else v.decode() for k, v in metadata}
        )
        return super().build(context)


@contextlib.asynccontextmanager
async def grpc_server(
    handler: DefaultRequestHandler, seen: Seen, *, v03: bool = False
) -> AsyncIterator[str]:
    """The SDK's ``GrpcHandler`` (``CompatGrpcHandler``: the 0.3 service) for ``handler`` on a
    loopback port; yields ``127.0.0.1:port``."""
    server = grpc.aio.server()
    builder = _RecordMetadata(seen)
    if v03:
        a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(
            CompatGrpcHandler(handler, context_builder=builder), server
        )
    else:
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(
            GrpcHandler(handler, context_builder=builder), server
        )
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(grace=1.0)


@dataclass
class Plain:
    """A running plain peer."""

    url: str  # where its card is
    card: AgentCard  # as served
    seen: Seen


StartPlain = Callable[..., Awaitable[Plain]]


async def start_plain(
    stack: contextlib.AsyncExitStack,
    answer: Answer,
    *,
    bindings: tuple[str, ...] = ("JSONRPC", "HTTP+JSON"),
    v03: bool = False,
    pure_v03_card: bool = False,
    name: str = "Plain",
) -> Plain:
    """Start a plain peer until ``stack`` closes. ``bindings`` in the card's preference order;
    ``v03``: 0.3 interfaces and the SDK's 0.3 compat routes; ``pure_v03_card``: serve the card
    as a 0.3 server does (``url``, ``preferredTransport``, no ``supportedInterfaces``)."""
    seen, sock = Seen(), free_socket()
    base = url_of(sock)
    urls = {"JSONRPC": f"{base}/", "HTTP+JSON": f"{base}/rest"}
    version = "0.3" if v03 else "1.0"
    card = plain_card(name, [], version=version)
    handler = handler_for(card, answer, seen)
    if "GRPC" in bindings:
        urls["GRPC"] = await stack.enter_async_context(grpc_server(handler, seen, v03=v03))
    card.CopyFrom(plain_card(name, [(b, urls[b]) for b in bindings], version=version))
    if {"JSONRPC", "HTTP+JSON"} & set(bindings):
        document = v03_card_json(card) if pure_v03_card else None
        app = plain_http_app(card, handler, seen, v03=v03, card_json=document)
    else:
        app = card_only_app(card)
    url = await stack.enter_async_context(running(app, sock))
    return Plain(url, card, seen)
