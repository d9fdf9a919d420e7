"""Restart recovery on a shared PostgreSQL store through real nodes (recover_orphaned: true).

A replica starting next to a live one must not fail the live one's working tasks; a node starting
alone still fails the tasks a dead process left working.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus

from node.card import parse_card
from node.server.app import build_node_app
from node.store.postgres import PostgresTaskStore
from node.tooling import ToolContext, tool
from tests.servers import free_socket, running
from tests.store.conftest import PG_URL, caller, pg_table_url

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]
A2A = {"A2A-Version": "1.0"}
CARD = {"id": "replica", "name": "Replica", "description": "A replica.", "tools": ["calculate"]}


@tool(read_only=True)
async def wait_for(seconds: float, ctx: ToolContext) -> str:
    """Wait, then answer.

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return "done"


@asynccontextmanager
async def replica(store_url: str, data_dir: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    card = parse_card(CARD, env={})
    assert card.server.recover_orphaned  # the default under test
    sock = free_socket()
    public_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build_node_app(
        card, public_url=public_url, data_dir=data_dir, store=store_url, tools=[wait_for]
    )
    async with (
        running(app, sock) as url,
        httpx.AsyncClient(base_url=url, headers=A2A, timeout=15) as client,
    ):
        yield client, app.state.node.runtime


async def rpc(client: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(
        "/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    body: dict[str, Any] = response.json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


async def state_of(client: httpx.AsyncClient, task_id: str) -> str:
    task = await rpc(client, "GetTask", {"id": task_id})
    state: str = task["status"]["state"]
    return state


async def test_recovery_spares_live_replicas_and_still_runs_alone(tmp_path: Path) -> None:
    async with pg_table_url() as (store_url, table):
        async with replica(store_url, tmp_path / "a") as (a, _):
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"skill": "wait_for", "arguments": {"seconds": 1.0}}}],
            }
            config = {"returnImmediately": True}
            sent = await rpc(a, "SendMessage", {"message": message, "configuration": config})
            task_id = sent["task"]["id"]
            async with replica(store_url, tmp_path / "b") as (b, b_state):
                assert b_state.recovered == 0  # A is alive: its task is not orphaned
                deadline = time.monotonic() + 15
                while (state := await state_of(b, task_id)) != "TASK_STATE_COMPLETED":
                    assert state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), state
                    assert time.monotonic() < deadline, "the task never completed"
                    await asyncio.sleep(0.05)

        # Every replica is gone; one left a task WORKING. A node starting alone recovers it.
        dead = PostgresTaskStore(PG_URL, table=table, max_size=1)
        left = Task(
            id="left-working",
            context_id="c",
            status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
            history=[Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="x")])],
        )
        await dead.save(left, caller(""))
        await dead.close()  # the process is gone, and its replica lock with it
        async with replica(store_url, tmp_path / "c") as (c, c_state):
            assert c_state.recovered == 1
            assert await state_of(c, "left-working") == "TASK_STATE_FAILED"
