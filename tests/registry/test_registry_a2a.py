"""The registry as an A2A agent: its card, and find_agents through the official client.

find_agents answers with one agent message and stores no task (the store must stay empty).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from uuid import uuid4

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_part
from a2a.types import ListTasksRequest, Message, Part, Role, SendMessageRequest

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


async def send(client: Client, part: Part) -> Message:
    """Send one message; the answer must be exactly one agent message with no task."""
    message = Message(role=Role.ROLE_USER, parts=[part], message_id=uuid4().hex)
    events = [ev async for ev in client.send_message(SendMessageRequest(message=message))]
    assert [ev.WhichOneof("payload") for ev in events] == ["message"]
    reply = events[0].message
    assert reply.role == Role.ROLE_AGENT and not reply.task_id
    return reply


def reply_data(reply: Message) -> dict[str, Any]:
    (data,) = get_data_parts(reply.parts)
    assert isinstance(data, dict)
    return data


def found(reply: Message) -> list[str]:
    return [agent["id"] for agent in reply_data(reply)["agents"]]


async def test_card_publishes_find_agents(client: httpx.AsyncClient) -> None:
    card = (await client.get("/.well-known/agent-card.json")).json()
    assert [s["id"] for s in card["skills"]] == ["find_agents"]
    bindings = {i["protocolBinding"]: i["url"] for i in card["supportedInterfaces"]}
    assert bindings["JSONRPC"].endswith("/a2a")
    assert bindings["HTTP+JSON"].endswith("/a2a/rest")


async def test_find_agents_by_data_part(a2a_client: Client) -> None:
    request = {"skill": "find_agents", "arguments": {"skill": "add", "tag": "math"}}
    reply = await send(a2a_client, new_data_part(request))
    assert found(reply) == ["adder", "calculator"]
    assert get_message_text(reply) == "found 2 agents"
    data = reply_data(reply)
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
    reply = await send(a2a_client, new_data_part({"arguments": {"tag": "math", "limit": 1}}))
    assert found(reply) == ["adder"]
    assert get_message_text(reply) == "found 1 agent; more with next_page_token"
    token = reply_data(reply)["next_page_token"]
    follow = {"arguments": {"tag": "math", "limit": 1, "page_token": token}}
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
async def test_bad_requests_are_answered_with_an_error_message(
    a2a_client: Client, request_data: dict[str, Any]
) -> None:
    reply = await send(a2a_client, new_data_part(request_data))
    error = reply_data(reply)["error"]
    assert error["code"] == "bad_request" and error["message"]
    assert get_message_text(reply) == f"bad request: {error['message']}"


async def test_find_agents_stores_no_task(a2a_client: Client) -> None:
    await send(a2a_client, Part(text="translates"))
    await send(a2a_client, new_data_part({"arguments": {"limit": 0}}))
    assert list((await a2a_client.list_tasks(ListTasksRequest())).tasks) == []


async def test_rest_binding_answers_under_a2a_rest(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Adder", skills=[card_server.skill("add", "math")])
    await client.post("/v1/agents", json={"card_url": url})
    body = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "add"}]}}
    headers = {"A2A-Version": "1.0"}
    response = await client.post("/a2a/rest/message:send", json=body, headers=headers)
    assert response.status_code == 200, response.text
    reply = response.json()["message"]
    assert reply["role"] == "ROLE_AGENT"
    assert reply["parts"][0]["data"]["agents"][0]["id"] == "adder"
    assert reply["parts"][1] == {"text": "found 1 agent"}
    tasks = await client.get("/a2a/rest/tasks", headers=headers)
    assert tasks.status_code == 200 and tasks.json().get("tasks", []) == []
    assert (await client.get("/v1/agents/adder")).status_code == 200  # /v1 still routed first


async def test_jsonrpc_send_message_result_is_a_message(
    client: httpx.AsyncClient, card_server
) -> None:
    url = card_server.put_card("/a.json", "Adder", skills=[card_server.skill("add", "math")])
    await client.post("/v1/agents", json={"card_url": url})
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "add"}]}
    headers = {"A2A-Version": "1.0"}

    async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = await client.post("/a2a", json=body, headers=headers)
        assert response.status_code == 200 and "error" not in response.json(), response.text
        return dict(response.json()["result"])

    result = await rpc("SendMessage", {"message": message})
    assert list(result) == ["message"]
    assert result["message"]["parts"][0]["data"]["agents"][0]["id"] == "adder"
    assert (await rpc("ListTasks", {})).get("tasks", []) == []


async def test_streaming_send_yields_one_message(registry_url: str) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        card = await A2ACardResolver(http, registry_url).get_agent_card()
        config = ClientConfig(streaming=True, httpx_client=http)
        client = ClientFactory(config).create(card)
        try:
            assert found(await send(client, Part(text="translates"))) == ["translator"]
        finally:
            await client.close()
