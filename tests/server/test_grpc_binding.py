"""The gRPC binding, driven by the official a2a-sdk client (``ClientFactory``, GRPC binding).

Each node here runs for real: uvicorn on a loopback port for the card, and its lifespan's gRPC
server on an ephemeral loopback port that the card advertises.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as v03_grpc
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
    a2a_pb2_grpc,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from node.card import parse_card
from node.client import artifacts_of, data_message, skill_message, status_text
from node.errors import ConfigError
from node.server.app import build_node_app
from node.server.grpc_binding import GrpcBinding
from tests.server.conftest import TEST_TOOLS, card_data

pytestmark = pytest.mark.network

ADMIN_TOKEN = "admin-token-123"
READER_KEY = "reader-key-123"
AUTH = {
    "bearer_tokens": [
        {"secret": "${ADMIN}", "principal": "admin", "capabilities": ["admin"]},
    ],
    "api_keys": [{"secret": "${READER}", "principal": "reader"}],
}
ENV = {"ADMIN": ADMIN_TOKEN, "READER": READER_KEY}
Start = Callable[..., Any]


@pytest.fixture
def start_grpc_node(serve, tmp_path: Path) -> Start:
    """``card = await start_grpc_node(**card_overrides)``: a node serving gRPC on a free port."""

    async def start(**overrides: Any) -> AgentCard:
        overrides.setdefault("server", {})["grpc_port"] = 0
        card = parse_card(card_data(**overrides), env=ENV)
        url = await serve(
            lambda public_url: build_node_app(
                card, public_url=public_url, data_dir=tmp_path / card.id, tools=TEST_TOOLS
            )
        )
        async with httpx.AsyncClient(timeout=5.0) as http:
            return await A2ACardResolver(http, url).get_agent_card()

    return start


@pytest.fixture
async def clients() -> AsyncIterator[Callable[..., Client]]:
    """``client = clients(card, streaming=False)``: an SDK client over gRPC, closed at the end."""
    made: list[Client] = []

    def make(card: AgentCard, *, streaming: bool = False) -> Client:
        config = ClientConfig(
            streaming=streaming,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = ClientFactory(config).create(card)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


def grpc_interfaces(card: AgentCard) -> dict[str, str]:
    return {
        i.protocol_version: i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"
    }


def auth(token: str | None = None, key: str | None = None) -> ClientCallContext:
    params = {}
    if token:
        params["authorization"] = f"Bearer {token}"
    if key:
        params["x-api-key"] = key
    return ClientCallContext(service_parameters=params)


async def send(client: Client, message: Any, context: ClientCallContext | None = None) -> Any:
    events = [
        e async for e in client.send_message(SendMessageRequest(message=message), context=context)
    ]
    return events[-1].task


async def test_the_card_declares_grpc_at_1_0_and_0_3_on_the_bound_port(start_grpc_node):
    card = await start_grpc_node()
    urls = grpc_interfaces(card)
    assert set(urls) == {"1.0", "0.3"}
    host, port = urls["1.0"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0 and urls["0.3"] == urls["1.0"]
    compat = to_compat_agent_card(card)  # a 0.3 client is pointed at JSON-RPC, offered gRPC
    assert compat.preferred_transport == "JSONRPC"
    assert ("GRPC", urls["0.3"]) in {(i.transport, i.url) for i in compat.additional_interfaces}


async def test_a_node_without_0_3_serves_and_declares_grpc_1_0_only(start_grpc_node, clients):
    card = await start_grpc_node(server={"a2a_v0_3": False})
    assert set(grpc_interfaces(card)) == {"1.0"}
    task = await send(clients(card), skill_message("calculate", {"expression": "1"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_blocking_send_get_and_list(start_grpc_node, clients):
    client = clients(await start_grpc_node())
    task = await send(client, skill_message("calculate", {"expression": "6*7"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_of(task) == {"calculate": [42]}
    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.id == task.id and fetched.status.state == TaskState.TASK_STATE_COMPLETED
    listed = await client.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [task.id]
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_streaming_send_reports_working_then_completed(start_grpc_node, clients):
    client = clients(await start_grpc_node(), streaming=True)
    message = skill_message("slow", {"seconds": 0.05})
    events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    assert len(events) > 1
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert TaskState.TASK_STATE_WORKING in states
    assert states[-1] == TaskState.TASK_STATE_COMPLETED


async def test_many_concurrent_sends_on_one_channel_all_complete(start_grpc_node, clients):
    client = clients(await start_grpc_node(server={"store": "memory"}))
    messages = [skill_message("calculate", {"expression": f"{i} * 3"}) for i in range(200)]
    tasks = await asyncio.gather(*(send(client, m) for m in messages))
    assert [artifacts_of(t) for t in tasks] == [{"calculate": [i * 3]} for i in range(200)]


async def test_cancel_a_running_task(start_grpc_node, clients):
    card = await start_grpc_node()
    client = clients(card)
    request = SendMessageRequest(
        message=skill_message("slow", {"seconds": 30}),
        configuration=SendMessageConfiguration(return_immediately=True),
    )
    started = [e async for e in client.send_message(request)][-1].task
    canceled = await client.cancel_task(CancelTaskRequest(id=started.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    fetched = await client.get_task(GetTaskRequest(id=started.id))
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED


async def test_unknown_skill_is_rejected_and_invalid_params_are_refused(start_grpc_node, clients):
    client = clients(await start_grpc_node())
    task = await send(client, skill_message("no_such_skill", {}))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "unknown skill" in status_text(task)
    with pytest.raises(InvalidParamsError):
        await client.send_message(SendMessageRequest()).__anext__()  # no message, no parts


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
async def test_a_non_finite_number_is_refused_naming_its_field(start_grpc_node, clients, number):
    client = clients(await start_grpc_node())
    message = data_message({"skill": "calculate", "arguments": {"expression": "1", "x": number}})
    with pytest.raises(InvalidParamsError, match=r"message\.parts\[0\]\.data\.arguments\.x"):
        await send(client, message)
    task = await send(client, skill_message("calculate", {"expression": "1+1"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED  # and the node keeps serving


async def test_an_oversize_message_is_resource_exhausted(start_grpc_node, clients):
    client = clients(await start_grpc_node(limits={"max_body_bytes": 10_000}))
    big = skill_message("text_stats", {"text": "x" * 20_000})
    with pytest.raises(A2AClientError, match="RESOURCE_EXHAUSTED"):
        await send(client, big)
    task = await send(client, skill_message("text_stats", {"text": "x" * 1000}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_calls_without_valid_credentials_are_unauthenticated(start_grpc_node, clients):
    client = clients(await start_grpc_node(auth=AUTH))
    message = skill_message("calculate", {"expression": "1"})
    for context in (None, auth(token="wrong-token-1"), auth(key="wrong-key-12")):
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await send(client, message, context)
    with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
        await client.get_task(GetTaskRequest(id="x"))


async def test_credentials_give_the_same_principal_and_capabilities_as_http(
    start_grpc_node, clients
):
    client = clients(await start_grpc_node(auth=AUTH))
    admin, reader = auth(token=ADMIN_TOKEN), auth(key=READER_KEY)
    task = await send(client, skill_message("admin_only", {}), admin)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    refused = await send(client, skill_message("admin_only", {}), reader)
    assert "missing capability: admin" in status_text(refused)
    with pytest.raises(TaskNotFoundError):  # tasks are scoped to their principal
        await client.get_task(GetTaskRequest(id=task.id), context=reader)
    assert (await client.get_task(GetTaskRequest(id=task.id), context=admin)).id == task.id


async def test_a_task_sent_over_http_is_the_same_principals_over_grpc(start_grpc_node, clients):
    card = await start_grpc_node(auth=AUTH)
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=10.0) as http:
        config = ClientConfig(
            streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"]
        )
        async with ClientFactory(config).create(card) as over_http:
            task = await send(over_http, skill_message("admin_only", {}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    over_grpc = clients(card)
    fetched = await over_grpc.get_task(GetTaskRequest(id=task.id), context=auth(token=ADMIN_TOKEN))
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(TaskNotFoundError):
        await over_grpc.get_task(GetTaskRequest(id=task.id), context=auth(key=READER_KEY))


async def test_the_0_3_grpc_service_serves_the_same_node(start_grpc_node, clients):
    card = await start_grpc_node()
    only_0_3 = AgentCard()
    only_0_3.CopyFrom(card)
    del only_0_3.supported_interfaces[:]
    only_0_3.supported_interfaces.extend(
        i for i in card.supported_interfaces if i.protocol_version == "0.3"
    )
    client = clients(only_0_3)
    task = await send(client, skill_message("calculate", {"expression": "2+3"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    same_node = clients(card)  # the 1.0 service sees the task the 0.3 one created
    assert (await same_node.get_task(GetTaskRequest(id=task.id))).id == task.id


async def test_a_taken_port_is_a_config_error(start_grpc_node):
    card = await start_grpc_node()
    taken = int(grpc_interfaces(card)["1.0"].rsplit(":", 1)[1])
    settings = parse_card(card_data(), env={}).auth
    binding = GrpcBinding(None, host="127.0.0.1", port=taken, auth=settings, max_message_bytes=1)
    with pytest.raises(ConfigError, match=f"127.0.0.1:{taken}: the port is in use"):
        await binding.start()


async def test_the_0_3_service_refuses_a_non_finite_number_too(start_grpc_node):
    address = grpc_interfaces(await start_grpc_node())["0.3"]
    request = v03.SendMessageRequest()
    request.request.message_id = "m-nan"
    request.request.role = v03.ROLE_USER
    data = request.request.content.add().data.data
    data.update({"skill": "calculate", "arguments": {"expression": "1", "x": math.nan}})
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await v03_grpc.A2AServiceStub(channel).SendMessage(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "message.content[0].data.data.arguments.x: NaN" in (refused.value.details() or "")


async def test_a_request_too_deep_to_decode_is_invalid_argument(start_grpc_node):
    address = grpc_interfaces(await start_grpc_node())["1.0"]
    request = SendMessageRequest()
    request.message.message_id = "m-deep"
    request.message.role = Role.ROLE_USER
    value = request.message.parts.add().data
    for _ in range(40):  # protobuf decodes at most 100 nested messages (~33 JSON levels)
        value = value.struct_value.fields["a"]
    value.number_value = 1
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "request cannot be decoded" in (refused.value.details() or "")
