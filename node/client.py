"""A small helper for orchestrators: connect to a node with the official a2a-sdk client.

    async with NodeClient.connect("http://127.0.0.1:8001", token=...) as node:
        task = await node.call("calculate", {"expression": "2+2"})
        print(artifacts_of(task))

Messages are built with :func:`skill_message` (a structured call) or :func:`text_message`.
Values come back as Python: protobuf stores every number as a double, so whole numbers in data
parts and in published skill schemas are turned back into ints (:mod:`node.protocol`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from node.errors import PeerError
from node.outbound_http import outbound_client
from node.peers.cards import skill_schemas
from node.protocol import INTERRUPTED, TERMINAL, normalise_numbers

WELL_KNOWN = "/.well-known"


def _message(parts: list[Part], metadata: Mapping[str, Any] | None, task: Task | None) -> Message:
    msg = Message(role=Role.ROLE_USER, parts=parts, message_id=uuid.uuid4().hex)
    if metadata:
        msg.metadata.CopyFrom(ParseDict(dict(metadata), Struct()))
    if task is not None:
        msg.task_id, msg.context_id = task.id, task.context_id
    return msg


def skill_message(
    skill: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    metadata: Mapping[str, Any] | None = None,
    task: Task | None = None,
) -> Message:
    """A structured request: one data part ``{"skill": ..., "arguments": {...}}``."""
    data = {"skill": skill, "arguments": dict(arguments or {})}
    return _message([Part(data=ParseDict(data, Value()))], metadata, task)


def data_message(data: Any, *, task: Task | None = None) -> Message:
    return _message([Part(data=ParseDict(data, Value()))], None, task)


def text_message(text: str, *, skill: str | None = None, task: Task | None = None) -> Message:
    """A text request, optionally addressed to a skill through ``metadata.skill``."""
    return _message([Part(text=text)], {"skill": skill} if skill else None, task)


def part_value(part: Part) -> Any:
    """A part's content as Python: text, JSON data (whole numbers as ints), or a placeholder."""
    if part.HasField("text"):
        return part.text
    if part.HasField("data"):
        return normalise_numbers(MessageToDict(part.data))
    if part.HasField("url"):
        return {"url": part.url}
    return {"raw_bytes": len(part.raw)}


def artifacts_of(task: Task) -> dict[str, list[Any]]:
    """``{artifact name: [part values]}`` of a task, every artifact kept in order.

    A batch calling one skill twice gives two artifacts of the same name; their values follow
    each other in that name's list (``{"calculate": [2, 4]}``).
    """
    found: dict[str, list[Any]] = {}
    for artifact in task.artifacts:
        values = found.setdefault(artifact.name or artifact.artifact_id, [])
        values.extend(part_value(p) for p in artifact.parts)
    return found


def status_text(task: Task) -> str:
    return "\n".join(p.text for p in task.status.message.parts if p.HasField("text"))


class NodeClient:
    """An a2a-sdk client bound to one node, with convenience calls."""

    def __init__(self, client: Client, card: AgentCard) -> None:
        self.client = client
        self.card = card

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        url: str,
        *,
        token: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        streaming: bool = True,
        http: httpx.AsyncClient | None = None,
    ) -> AsyncIterator[NodeClient]:
        """Connect to the node at ``url``: its base URL or its card URL (``…/agent-card.json``).

        The card's interfaces decide where requests go: a node built with
        ``build_node_app(card, public_url=...)`` advertises that URL.

        A new client is the node's own outbound one (httpx over aiohttp:
        :mod:`node.outbound_http`). ``http`` is an httpx client to use instead (``timeout``
        then does not apply): one shared with other calls, or one routed in-process to the
        node's ASGI app (``httpx.ASGITransport``). It stays open, and ``token``/``api_key`` are
        set on its headers, so give each caller its own.
        """
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if api_key:
            headers["X-API-Key"] = api_key
        own = http is None
        client_http = http or outbound_client(timeout=httpx.Timeout(timeout, connect=5.0))
        client_http.headers.update(headers)
        try:
            base, card_path = split_card_url(url)
            resolver = A2ACardResolver(client_http, base, agent_card_path=card_path)
            card = await resolver.get_agent_card()
            config = ClientConfig(
                streaming=streaming,
                httpx_client=client_http,
                supported_protocol_bindings=["JSONRPC", "HTTP+JSON"],
            )
            yield cls(ClientFactory(config).create(card), card)
        finally:
            if own:
                await client_http.aclose()

    async def events(
        self, message: Message, *, return_immediately: bool = False
    ) -> AsyncIterator[StreamResponse]:
        request = SendMessageRequest(message=message)
        if return_immediately:
            request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
        async for event in self.client.send_message(request):
            yield event

    def skill_schemas(self) -> dict[str, dict[str, Any]]:
        """The input schema of each skill, as the node's card publishes them (ints as ints)."""
        return skill_schemas(self.card)

    async def reply(self, message: Message) -> Task | Message:
        """Send and wait for the answer: the last task snapshot (terminal or interrupted), or
        the agent's message when it answers without a task (as the registry's ``find_agents``).
        """
        task = Task()
        async for event in self.events(message):
            if event.HasField("message"):
                return event.message
            task = _apply(task, event)
        if task.id and task.status.state not in TERMINAL | INTERRUPTED:
            task = await self.wait(task.id)
        return task

    async def send(self, message: Message) -> Task:
        """Send and wait: the last task snapshot seen (terminal or interrupted).

        Raises :class:`PeerError` when the agent answers with a message instead of a task
        (use :meth:`reply` for such agents).
        """
        answer = await self.reply(message)
        if isinstance(answer, Message):
            raise PeerError(
                f"{self.card.name} answered with a message, not a task; use NodeClient.reply()"
            )
        return answer

    async def call(self, skill: str, arguments: Mapping[str, Any] | None = None) -> Task:
        return await self.send(skill_message(skill, arguments))

    async def get(self, task_id: str) -> Task:
        return await self.client.get_task(GetTaskRequest(id=task_id))

    async def cancel(self, task_id: str) -> Task:
        return await self.client.cancel_task(CancelTaskRequest(id=task_id))

    async def wait_for_state(self, task_id: str, state: int, *, timeout: float = 10.0) -> Task:
        """Poll until the task reaches ``state`` (or any terminal state), within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            task = await self.get(task_id)
            if task.status.state == state or task.status.state in TERMINAL:
                return task
            if time.monotonic() > deadline:
                return task
            await asyncio.sleep(0.02)

    async def wait(self, task_id: str, *, timeout: float = 60.0, interval: float = 0.05) -> Task:
        """Poll until the task is terminal or interrupted (bounded backoff)."""
        deadline = time.monotonic() + timeout
        while True:
            task = await self.get(task_id)
            if task.status.state in TERMINAL | INTERRUPTED or time.monotonic() > deadline:
                return task
            await asyncio.sleep(interval)
            interval = min(interval * 2, 1.0)


def split_card_url(url: str) -> tuple[str, str]:
    """``(base URL, card path)`` of a node given by its base URL or its card URL."""
    url = url.rstrip("/")
    if url.endswith(".json"):
        base, _, name = url.rpartition("/")
        if base.endswith(WELL_KNOWN):  # …/.well-known/agent-card.json
            return base.removesuffix(WELL_KNOWN), f"{WELL_KNOWN}/{name}"
        return base, name
    return url, AGENT_CARD_WELL_KNOWN_PATH


def _apply(task: Task, event: StreamResponse) -> Task:
    """Fold one stream event into a task snapshot."""
    if event.HasField("task"):
        return event.task
    if event.HasField("status_update"):
        task.id = task.id or event.status_update.task_id
        task.context_id = task.context_id or event.status_update.context_id
        task.status.CopyFrom(event.status_update.status)
    elif event.HasField("artifact_update"):
        task.artifacts.append(event.artifact_update.artifact)
    return task


apply_event = _apply
