"""Real a2a-sdk peers on loopback for the peer-layer tests.

``PeerExecutor`` answers structured ``{"skill", "arguments"}`` data parts (and ``{text, data}``
messages naming the skill in ``metadata["skill"]``):

- ``add``: completes with one data artifact ``{"sum": a + b}``;
- ``fail``: fails with a status message; ``ask``: goes input-required;
- ``slow``: works until the hop deadline has passed, then fails (unless cancelled first);
- ``hops``: completes with the HOP metadata it received;
- ``shout`` (no published schema): completes with the text upper-cased.

Every received message's metadata and every cancel are recorded in a :class:`Recorder`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a.helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
)
from google.protobuf import json_format, struct_pb2
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from node.card import parse_card
from node.protocol import HOP, SKILL_SCHEMAS
from node.registry import RegistrySettings, build_registry_app
from node.server.app import build_node_app

NUMBER = {"type": "number"}
SCHEMAS: dict[str, Any] = {
    "add": {
        "type": "object",
        "properties": {"a": NUMBER, "b": NUMBER},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    "fail": {"type": "object", "properties": {}},
    "ask": {"type": "object", "properties": {}},
    "slow": {"type": "object", "properties": {}},
    "hops": {"type": "object", "properties": {}},
}
SKILLS = [
    AgentSkill(id="add", name="Add", description="Add two numbers", tags=["math"]),
    AgentSkill(id="fail", name="Fail", description="Always fails", tags=["test"]),
    AgentSkill(id="ask", name="Ask", description="Asks for more input", tags=["test"]),
    AgentSkill(id="slow", name="Slow", description="Never finishes", tags=["test"]),
    AgentSkill(id="hops", name="Hops", description="Echoes the hop metadata", tags=["test"]),
    AgentSkill(id="shout", name="Shout", description="Upper-cases text", tags=["text"]),
]


@dataclass
class Recorder:
    metadata: list[dict[str, Any]] = field(default_factory=list)
    cancels: list[str] = field(default_factory=list)


def _struct(value: Any) -> struct_pb2.Struct:
    return json_format.ParseDict(value, struct_pb2.Struct())


class PeerExecutor(AgentExecutor):
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        metadata = json_format.MessageToDict(message.metadata)
        self.recorder.metadata.append(metadata)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        data = [json_format.MessageToDict(p.data) for p in message.parts if p.HasField("data")]
        text = "\n".join(p.text for p in message.parts if p.HasField("text"))
        if data and isinstance(data[0], dict) and "skill" in data[0]:
            skill, args = data[0]["skill"], data[0].get("arguments", {})
        else:
            skill, args = metadata.get("skill"), {"text": text, "data": data}
        if skill == "add":
            await up.add_artifact([new_data_part({"sum": args["a"] + args["b"]})], name="sum")
            await up.complete()
        elif skill == "fail":
            await up.failed(up.new_agent_message([new_text_part("boom: b is bad")]))
        elif skill == "ask":
            await up.requires_input(up.new_agent_message([new_text_part("need 'b'")]))
        elif skill == "slow":  # like a well-behaved node: works until the hop deadline, then fails
            deadline = metadata.get(HOP, {}).get("deadline", time.time() + 10)
            await asyncio.sleep(max(0.0, deadline - time.time()) + 0.5)
            await up.failed(up.new_agent_message([new_text_part("deadline passed")]))
        elif skill == "hops":
            await up.add_artifact([new_data_part(metadata.get(HOP))], name="hops")
            await up.complete()
        elif skill == "shout":
            await up.add_artifact([new_text_part(args["text"].upper())], name="shout")
            await up.complete()
        else:
            await up.reject(up.new_agent_message([new_text_part(f"unknown skill {skill}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        self.recorder.cancels.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def peer_card(
    url: str,
    *,
    agent_id: str = "b",
    name: str = "Peer B",
    streaming: bool = True,
    skills: list[AgentSkill] | None = None,
    rest_only: bool = False,
) -> AgentCard:
    interfaces = [
        AgentInterface(protocol_binding="HTTP+JSON", url=f"{url}/rest", protocol_version="1.0")
    ]
    if not rest_only:
        interfaces.insert(
            0, AgentInterface(protocol_binding="JSONRPC", url=f"{url}/", protocol_version="1.0")
        )
    extension = AgentExtension(
        uri=SKILL_SCHEMAS, params=_struct({"agent_id": agent_id, "schemas": SCHEMAS})
    )
    return AgentCard(
        name=name,
        description=f"{name} for tests",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming, extensions=[extension]),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills if skills is not None else SKILLS,
    )


class Flaky:
    """Answers the first ``failures`` POSTs with HTTP 503, then lets requests through."""

    def __init__(self, app: ASGIApp, failures: int) -> None:
        self.app, self.left, self.refused = app, failures, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and self.left > 0:
            self.left -= 1
            self.refused += 1
            await PlainTextResponse("busy", status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


class RequireToken:
    """Refuses A2A calls (not the card) without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            if headers.get("authorization") != f"Bearer {self.token}":
                await PlainTextResponse("no", status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def peer_app(card: AgentCard, recorder: Recorder) -> Starlette:
    handler = DefaultRequestHandler(
        agent_executor=PeerExecutor(recorder), task_store=InMemoryTaskStore(), agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    return Starlette(
        lifespan=lifespan,
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/"),
            Mount("/rest", routes=create_rest_routes(handler)),
        ],
    )


async def eventually(check: Callable[[], bool | Awaitable[bool]], within: float = 5.0) -> None:
    """Poll ``check`` until it is true, or fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


@dataclass
class Peer:
    url: str
    card: AgentCard
    recorder: Recorder


PeerFactory = Callable[..., Awaitable[Peer]]


REGISTRY_TOKEN = "reg-token"


def registry_app(db_path: str) -> ASGIApp:
    """node.registry's real app: SQLite in ``db_path``, writes need REGISTRY_TOKEN."""
    settings = RegistrySettings(
        db=db_path, token=SecretStr(REGISTRY_TOKEN), allow_cidrs=("127.0.0.0/8",)
    )
    return build_registry_app(settings)


async def calculating_node(serve: Callable[..., Awaitable[Any]], data_dir: Path, token: str) -> str:
    """A real node ``data`` (tool ``calculate``) with gRPC on, accepting bearer ``token``."""
    card = parse_card(
        {
            "id": "data",
            "name": "Data",
            "description": "Arithmetic.",
            "tools": ["calculate"],
            "server": {"grpc_port": 0},
            "auth": {"bearer_tokens": [{"secret": "${T}", "principal": "hub"}]},
        },
        env={"T": token},
    )
    url = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=data_dir, store="memory")
    )
    return str(url)


def one_interface(document: dict[str, Any], binding: str, version: str) -> dict[str, Any]:
    """The card document with one interface left (and the 0.3 fields dropped)."""
    interfaces = [
        i
        for i in document["supportedInterfaces"]
        if i["protocolBinding"] == binding and i["protocolVersion"] == version
    ]
    assert len(interfaces) == 1, document["supportedInterfaces"]
    legacy = ("url", "preferredTransport", "additionalInterfaces", "protocolVersion")
    kept = {k: v for k, v in document.items() if k not in legacy}
    return {**kept, "supportedInterfaces": interfaces}
