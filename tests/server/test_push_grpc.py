"""Push notifications through the official SDK client on every binding (gRPC included).

The node runs for real (uvicorn for the card, its gRPC server on an ephemeral port); the webhook
receiver is a real server on loopback, allowed only through ``network.allow_cidrs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from node.card import parse_card
from node.client import skill_message
from node.server.app import build_node_app
from tests.server.conftest import TEST_TOOLS, card_data
from tests.server.push_receiver import Receiver, eventually
from tests.servers import free_socket, running

pytestmark = pytest.mark.network


@pytest.mark.parametrize("binding", ["GRPC", "JSONRPC", "HTTP+JSON"])
async def test_the_sdk_client_sets_lists_and_deletes_configs_and_gets_events(
    serve, tmp_path: Path, binding: str
) -> None:
    hooks = Receiver()
    async with running(hooks.app(), free_socket()) as hook_url:
        card = parse_card(
            card_data(
                server={"grpc_port": 0},
                network={"allow_cidrs": ["127.0.0.0/8"]},
                push={"backoff_s": 0.05, "timeout_s": 3},
            ),
            env={},
        )
        url = await serve(
            lambda public_url: build_node_app(
                card, public_url=public_url, data_dir=tmp_path, tools=TEST_TOOLS
            )
        )
        async with httpx.AsyncClient(timeout=10.0) as http:
            agent_card = await A2ACardResolver(http, url).get_agent_card()
            assert agent_card.capabilities.push_notifications
            config = ClientConfig(
                streaming=False,
                httpx_client=http,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            client = ClientFactory(config).create(agent_card)
            try:
                await _exercise(client, hooks, hook_url)
            finally:
                await client.close()
        hooks.release()


async def _exercise(client: Any, hooks: Receiver, hook_url: str) -> None:
    push = TaskPushNotificationConfig(
        url=f"{hook_url}/hook/sdk",
        token="tok-sdk-1",
        authentication=AuthenticationInfo(scheme="Basic", credentials="dXNlcjpwdw=="),
    )
    request = SendMessageRequest(
        message=skill_message("calculate", {"expression": "6*7"}),
        configuration=SendMessageConfiguration(task_push_notification_config=push),
    )
    task = [e async for e in client.send_message(request)][-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    await eventually(
        lambda: [r.state for r in hooks.requests if r.state][-1:] == ["TASK_STATE_COMPLETED"]
    )
    assert {r.headers["authorization"] for r in hooks.requests} == {"Basic dXNlcjpwdw=="}
    assert {r.headers["x-a2a-notification-token"] for r in hooks.requests} == {"tok-sdk-1"}

    second = TaskPushNotificationConfig(task_id=task.id, id="second", url=f"{hook_url}/hook/2")
    created = await client.create_task_push_notification_config(second)
    assert (created.task_id, created.id) == (task.id, "second")
    got = await client.get_task_push_notification_config(
        GetTaskPushNotificationConfigRequest(task_id=task.id, id="second")
    )
    assert got.url == f"{hook_url}/hook/2"
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == [task.id, "second"]  # the default id is the task's
    await client.delete_task_push_notification_config(
        DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="second")
    )
    listed = await client.list_task_push_notification_configs(
        ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert [c.id for c in listed.configs] == [task.id]

    refused = TaskPushNotificationConfig(task_id=task.id, url="http://169.254.169.254/latest")
    with pytest.raises(InvalidParamsError, match="refused"):
        await client.create_task_push_notification_config(refused)
