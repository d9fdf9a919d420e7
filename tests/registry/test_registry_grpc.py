"""The registry's A2A endpoint over gRPC (``grpc_port``), through the official a2a-sdk client."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.helpers import get_data_parts, new_data_part
from a2a.types import AgentCard, Message, Role, SendMessageRequest
from pydantic import SecretStr

from node.registry import RegistrySettings, build_registry_app

pytestmark = pytest.mark.network
TOKEN = "registry-token-1"


async def start(serve_app, card_server, settings: RegistrySettings) -> AgentCard:
    """A registry serving gRPC on a free port, with one agent registered; its card."""

    def factory(url: str) -> Any:
        port = int(url.rsplit(":", 1)[1])
        return build_registry_app(settings.model_copy(update={"port": port, "grpc_port": 0}))

    url = await serve_app(factory)
    skills = [card_server.skill("add", "math")]
    card_url = card_server.put_card("/Adder.json", "Adder", skills=skills)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=5) as http:
        assert (await http.post("/v1/agents", json={"card_url": card_url})).status_code == 201
        return await A2ACardResolver(http, url).get_agent_card()


async def find(card: AgentCard, context: ClientCallContext | None = None) -> list[str]:
    config = ClientConfig(
        streaming=False,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    part = new_data_part({"skill": "find_agents", "arguments": {"skill": "add"}})
    message = Message(role=Role.ROLE_USER, parts=[part], message_id=uuid4().hex)
    async with ClientFactory(config).create(card) as client:
        request = SendMessageRequest(message=message)
        (event,) = [e async for e in client.send_message(request, context=context)]
    (data,) = get_data_parts(event.message.parts)
    return [agent["id"] for agent in data["agents"]]


async def test_find_agents_over_grpc(serve_app, card_server, settings):
    card = await start(serve_app, card_server, settings)
    grpc_urls = {i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"}
    (address,) = grpc_urls
    assert address.startswith("127.0.0.1:") and not address.endswith(":0")
    assert await find(card) == ["adder"]


async def test_reads_that_need_a_token_need_it_over_grpc_too(serve_app, card_server, settings):
    locked = settings.model_copy(update={"token": SecretStr(TOKEN), "read_token_required": True})
    card = await start(serve_app, card_server, locked)
    with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
        await find(card)
    bearer = ClientCallContext(service_parameters={"authorization": f"Bearer {TOKEN}"})
    assert await find(card, bearer) == ["adder"]
