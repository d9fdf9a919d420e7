"""Terminal states are final across replicas: two nodes (app instances) on one PostgreSQL table.

Each replica is an app in this process (with its lifespan) and its own data directory; both use
the same fresh table (``postgresql://…?table=…``), as replicas of one node behind a load balancer.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import TaskState

from node.card import parse_card
from node.server.app import build_node_app
from tests.server.conftest import TEST_TOOLS, card_data
from tests.servers import InProcessApps
from tests.store.conftest import PG_URL, pg_table_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]
A2A = {"A2A-Version": "1.0"}
S = TaskState


@pytest.fixture
async def replicas(apps: InProcessApps, tmp_path: Path) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Two replicas of one node on one PostgreSQL table, as raw A2A HTTP clients."""
    card = parse_card(card_data(), env={})
    async with pg_table_url() as (store_url, _):
        urls = []
        for name in ("a", "b"):
            urls.append(
                await apps.start(
                    lambda public_url, name=name: build_node_app(
                        card,
                        public_url=public_url,
                        data_dir=tmp_path / name,
                        store=store_url,
                        tools=TEST_TOOLS,
                    ),
                    name=name,
                )
            )
        clients = [apps.client(base_url=u, headers=A2A, timeout=15) for u in urls]
        try:
            yield clients
        finally:
            for client in clients:
                await client.aclose()


def message(parts: list[dict[str, Any]], task: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    if task is not None:
        msg.update(taskId=task["id"], contextId=task["contextId"])
    return msg


def skill(name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"data": {"skill": name, "arguments": arguments}}]


async def call(node: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await node.post(
        "/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def send(node: httpx.AsyncClient, msg: dict[str, Any], **config: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": msg}
    if config:
        params["configuration"] = config
    body = await call(node, "SendMessage", params)
    assert "result" in body, body
    task: dict[str, Any] = body["result"]["task"]
    return task


async def get(node: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    body = await call(node, "GetTask", {"id": task_id})
    task: dict[str, Any] = body["result"]
    return task


async def test_a_message_to_a_terminal_task_gets_32004_on_every_replica(replicas) -> None:
    a, b = replicas
    waiting = await send(a, message(skill("calculate", {})))  # parked in A's memory
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = await send(b, message([{"text": "2 ** 10"}], waiting))  # continued and finished on B
    assert done["id"] == waiting["id"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"

    for node in (a, b):
        body = await call(node, "SendMessage", {"message": message([{"text": "3 + 3"}], done)})
        assert body.get("error", {}).get("code") == -32004, body
        assert "terminal state" in body["error"]["message"]
        stream = await node.post(
            "/",
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "SendStreamingMessage",
                "params": {"message": message([{"text": "4 + 4"}], done)},
            },
        )
        assert stream.json()["error"]["code"] == -32004, stream.text[:300]
        rest = await node.post(
            "/rest/message:send", json={"message": message([{"text": "5 + 5"}], done)}
        )
        assert rest.status_code == 400, rest.text[:300]
        assert rest.json()["error"]["status"] == "FAILED_PRECONDITION"
        assert "terminal state" in rest.json()["error"]["message"]

    for node in (a, b):
        stored = await get(node, done["id"])
        assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
        assert stored["artifacts"] == done["artifacts"]


async def test_a_cancel_through_another_replica_stays_canceled(replicas) -> None:
    a, b = replicas
    running = asyncio.create_task(send(a, message(skill("slow", {"seconds": 1.5}))))
    deadline = time.monotonic() + 10
    task_id = None
    while task_id is None:  # find the task A runs, through B
        assert time.monotonic() < deadline, "the task never appeared"
        body = await call(b, "ListTasks", {"status": "TASK_STATE_WORKING"})
        tasks = body["result"].get("tasks", [])
        task_id = tasks[0]["id"] if tasks else None
        if task_id is None:
            await asyncio.sleep(0.02)
    canceled = await call(b, "CancelTask", {"id": task_id})
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"

    finished = await asyncio.wait_for(running, timeout=15)  # A's tool ends; its saves are refused
    assert finished["id"] == task_id
    assert finished["status"]["state"] == "TASK_STATE_CANCELED"
    for node in (a, b):
        stored = await get(node, task_id)
        assert stored["status"]["state"] == "TASK_STATE_CANCELED"
        assert not stored.get("artifacts")
