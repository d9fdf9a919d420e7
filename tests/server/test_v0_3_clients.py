"""The a2a-sdk 1.3 client's own 0.3 transports complete tasks on a node with auth on.

The 1.3 client picks its 0.3-compat transports when the card interface it uses says protocol
0.3; the card is read here as a 0.3 client reads it (the 0.3 model, then converted to the core
card: 0.3 interfaces only), so nothing but 0.3 can be chosen, and the requests on the wire are
recorded to prove it (``message/send``, ``/rest/v1/message:send``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.conversions import to_core_agent_card
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from tests.servers import InProcessApps

TOKEN = "alice-token-123"
AUTH = {"bearer_tokens": [{"secret": "${ALICE_TOKEN}", "principal": "alice"}]}


@pytest.fixture
async def secured(start_node: Any) -> str:
    url: str = await start_node(auth=AUTH, env={"ALICE_TOKEN": TOKEN})
    return url


@pytest.fixture
async def wire(apps: InProcessApps) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """An authenticated client reaching the node, and what it sent (method or REST path)."""
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path == "/":
            seen.append(json.loads(request.content)["method"])
        elif request.url.path != "/.well-known/agent-card.json":
            seen.append(f"{request.method} {request.url.path}")

    async with apps.client(
        headers={"Authorization": f"Bearer {TOKEN}"}, event_hooks={"request": [record]}
    ) as http:
        yield http, seen


async def legacy_client(http: httpx.AsyncClient, url: str, binding: str) -> Client:
    """A 1.3 client for the node's card as a 0.3 client sees it."""
    body = (await http.get(url + "/.well-known/agent-card.json")).json()
    card = to_core_agent_card(v03.AgentCard.model_validate(body))
    assert {i.protocol_version for i in card.supported_interfaces} == {"0.3"}
    config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding])
    return ClientFactory(config).create(card)


def data_part(value: dict[str, Any]) -> Part:
    return Part(data=ParseDict(value, Value()))


async def send(client: Client, *parts: Part, metadata: dict[str, Any] | None = None) -> Any:
    message = Message(role=Role.ROLE_USER, parts=list(parts), message_id=uuid4().hex)
    if metadata:
        message.metadata.CopyFrom(ParseDict(metadata, Struct()))
    events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    (event,) = events
    assert event.WhichOneof("payload") == "task", event
    return event.task


@pytest.mark.parametrize(
    ("binding", "expected"),
    [
        ("JSONRPC", ["message/send", "message/send", "tasks/get"]),
        (
            "HTTP+JSON",
            ["POST /rest/v1/message:send", "POST /rest/v1/message:send", "GET /rest/v1/tasks/{id}"],
        ),
    ],
)
async def test_0_3_transports_complete_text_and_data_tasks_with_auth(
    secured: str, wire: tuple[httpx.AsyncClient, list[str]], binding: str, expected: list[str]
) -> None:
    http, seen = wire
    client = await legacy_client(http, secured, binding)

    data = await send(client, data_part({"skill": "calculate", "arguments": {"expression": "6*7"}}))
    assert data.status.state == TaskState.TASK_STATE_COMPLETED, data.status
    assert MessageToDict(data.artifacts[0])["parts"] == [{"data": 42}]  # unwrapped from 0.3

    text = await send(client, Part(text="2*21"), metadata={"skill": "calculate"})
    assert text.status.state == TaskState.TASK_STATE_COMPLETED, text.status
    assert MessageToDict(text.artifacts[0])["parts"] == [{"data": 42}]

    got = await client.get_task(GetTaskRequest(id=text.id))
    assert got.id == text.id and got.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == [entry.format(id=text.id) for entry in expected]
    await client.close()


async def test_0_3_transports_without_credentials_get_401(
    secured: str, apps: InProcessApps
) -> None:
    async with apps.client() as anonymous:
        body = (await anonymous.get(secured + "/.well-known/agent-card.json")).json()
        legacy = v03.AgentCard.model_validate(body)  # the card stays public
        assert legacy.security == [{"bearer": []}]
        for path, payload in [
            ("/", {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}),
            ("/rest/v1/message:send", {"request": {}}),
        ]:
            response = await anonymous.post(secured + path, json=payload)
            assert response.status_code == 401, (path, response.text)
