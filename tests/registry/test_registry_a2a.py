"""The registry as an A2A agent: its card, and find_agents through the official client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_part
from a2a.types import Message, Part, Role, SendMessageRequest, Task, TaskState

from node.registry import RegistrySettings, build_registry_app


@pytest.fixture
async def registry_url(serve_app, settings: RegistrySettings, card_server) -> str:
    def factory(url: str) -> Any:
        port = int(url.rsplit(":", 1)[1])
        return build_registry_app(settings.model_copy(update={"port": port}))

    url = await serve_app(factory)
    s = card_server.skill
    async with httpx.AsyncClient(base_url=url) as http:
        for name, skills in {
            "Translator": [s("translate", "language", description="Translates text")],
            "Calculator": [s("add", "math"), s("multiply", "math")],
            "Adder": [s("add", "math")],
        }.items():
            card_url = card_server.put_card(f"/{name}.json", name, skills=skills)
            response = await http.post("/v1/agents", json={"card_url": card_url})
            assert response.status_code == 201
    return url


@pytest.fixture
async def a2a_client(registry_url: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=5) as http:
        card = await A2ACardResolver(http, registry_url).get_agent_card()
        config = ClientConfig(
            streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"]
        )
        client = ClientFactory(config).create(card)
        yield client
        await client.close()


async def send(client: Client, part: Part) -> Task:
    message = Message(role=Role.ROLE_USER, parts=[part], message_id=uuid4().hex)
    tasks = [ev.task async for ev in client.send_message(SendMessageRequest(message=message))]
    assert len(tasks) == 1
    return tasks[0]


def found(task: Task) -> list[str]:
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = task.artifacts
    (data,) = get_data_parts(artifact.parts)
    return [agent["id"] for agent in data["agents"]]


async def test_card_publishes_find_agents(client: httpx.AsyncClient) -> None:
    card = (await client.get("/.well-known/agent-card.json")).json()
    assert [s["id"] for s in card["skills"]] == ["find_agents"]
    bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert bindings["JSONRPC"].endswith("/a2a")
    assert bindings["HTTP+JSON"].endswith("/a2a/rest")


async def test_find_agents_by_data_part(a2a_client: Client) -> None:
    request = {"skill": "find_agents", "arguments": {"skill": "add", "tag": "math"}}
    task = await send(a2a_client, new_data_part(request))
    assert found(task) == ["adder", "calculator"]
    (data,) = get_data_parts(task.artifacts[0].parts)
    assert data["agents"][0] == {
        "id": "adder",
        "name": "Adder",
        "card_url": data["agents"][0]["card_url"],
        "skills": [{"id": "add", "name": "Add", "description": "", "tags": ["math"]}],
        "healthy": True,
    }


async def test_find_agents_by_text(a2a_client: Client) -> None:
    assert found(await send(a2a_client, Part(text="translates"))) == ["translator"]


async def test_find_agents_with_a_limit_pages(a2a_client: Client) -> None:
    task = await send(a2a_client, new_data_part({"arguments": {"tag": "math", "limit": 1}}))
    assert found(task) == ["adder"]
    (data,) = get_data_parts(task.artifacts[0].parts)
    follow = {"arguments": {"tag": "math", "limit": 1, "page_token": data["next_page_token"]}}
    assert found(await send(a2a_client, new_data_part(follow))) == ["calculator"]


@pytest.mark.parametrize(
    "request_data",
    [
        {"skill": "book_flight", "arguments": {}},
        {"skill": "find_agents", "arguments": {"colour": "red"}},
        {"skill": "find_agents", "arguments": {"limit": 0}},
        {"skill": "find_agents", "arguments": {"q": 3}},
        {"skill": "find_agents", "arguments": []},
    ],
)
async def test_bad_requests_are_rejected(a2a_client: Client, request_data: dict[str, Any]) -> None:
    task = await send(a2a_client, new_data_part(request_data))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert task.status.message.parts[0].text


async def test_rest_binding_answers_under_a2a_rest(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Adder", skills=[card_server.skill("add", "math")])
    await client.post("/v1/agents", json={"card_url": url})
    body = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "add"}]}}
    response = await client.post(
        "/a2a/rest/message:send", json=body, headers={"A2A-Version": "1.0"}
    )
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["data"]["agents"][0]["id"] == "adder"
    assert (await client.get("/v1/agents/adder")).status_code == 200  # /v1 still routed first
