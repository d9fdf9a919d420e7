"""A send retried with the same messageId returns the first task and never runs the tools twice.

Nodes in-process (with their lifespans) on the in-memory store, SQLite and PostgreSQL (a fresh
table), through the a2a-sdk client over JSON-RPC and HTTP+JSON. ``counted`` records every run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.types import (
    ListTasksRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from node.card import parse_card
from node.client import artifacts_of, skill_message, text_message
from node.server.app import build_node_app
from node.tooling import ToolContext, tool
from tests.server.conftest import card_data, make_client
from tests.servers import InProcessApps
from tests.store.conftest import PG_URL, pg_table_url

S = TaskState
RUNS: Counter[str] = Counter()
BINDINGS = ["JSONRPC", "HTTP+JSON"]
STORES = [
    "memory",
    "sqlite",
    *([pytest.param("postgres", marks=pytest.mark.postgres)] if PG_URL else []),
]


@tool(read_only=True)
async def counted(label: str, seconds: float, ctx: ToolContext) -> int:
    """Count one run of ``label`` (after waiting ``seconds``); returns the runs so far.

    Args:
        label: What to count.
        seconds: How long to wait before counting.
    """
    await asyncio.sleep(seconds)
    RUNS[label] += 1
    return RUNS[label]


@pytest.fixture(params=STORES)
async def store_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param != "postgres":
        yield request.param
        return
    async with pg_table_url() as (url, _):
        yield url


@asynccontextmanager
async def node(apps: InProcessApps, store: str, data_dir: Path) -> AsyncIterator[str]:
    """A node serving until the block ends (its lifespan closes then)."""
    card = parse_card(card_data(), env={})
    async with apps.serving(
        lambda public_url: build_node_app(
            card, public_url=public_url, data_dir=data_dir, store=store, tools=[counted]
        ),
        name=card.id,
    ) as url:
        yield url


@pytest.fixture
async def http(apps: InProcessApps) -> AsyncIterator[httpx.AsyncClient]:
    async with apps.client(timeout=15) as client:
        yield client


def counting(label: str, seconds: float = 0.0) -> Message:
    return skill_message("counted", {"label": label, "seconds": seconds})


async def send(client: Client, message: Message, **config: Any) -> Task:
    request = SendMessageRequest(message=message)
    if config:
        request.configuration.CopyFrom(SendMessageConfiguration(**config))
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1
    return events[0].task


async def count_tasks(client: Client) -> int:
    page = await client.list_tasks(ListTasksRequest(page_size=100))
    return int(page.total_size)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_retried_send_returns_the_first_task_and_runs_once(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient, binding: str
) -> None:
    label = uuid.uuid4().hex
    message = counting(label)
    async with node(apps, store_url, tmp_path / "node") as url:
        client = await make_client(http, url, binding=binding)
        first = await send(client, message)
        assert first.status.state == S.TASK_STATE_COMPLETED
        retried = await send(client, message)  # the client timed out and sends it again
        assert retried.id == first.id
        assert retried.status.state == S.TASK_STATE_COMPLETED
        assert artifacts_of(retried) == {"counted": [1]}
        assert RUNS[label] == 1
        assert await count_tasks(client) == 1


async def test_concurrent_identical_sends_make_one_task(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    label = uuid.uuid4().hex
    message = counting(label, seconds=0.3)
    async with node(apps, store_url, tmp_path / "node") as url:
        client = await make_client(http, url)
        tasks = await asyncio.gather(*(send(client, message) for _ in range(3)))
        assert {t.id for t in tasks} == {tasks[0].id}
        assert all(t.status.state == S.TASK_STATE_COMPLETED for t in tasks)
        assert RUNS[label] == 1
        assert await count_tasks(client) == 1


async def test_a_blocking_retry_of_a_running_send_waits_for_its_result(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    label = uuid.uuid4().hex
    message = counting(label, seconds=0.4)
    async with node(apps, store_url, tmp_path / "node") as url:
        client = await make_client(http, url)
        started = await send(client, message, return_immediately=True)
        assert started.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING)
        done = await send(client, message)
        assert done.id == started.id
        assert done.status.state == S.TASK_STATE_COMPLETED
        assert artifacts_of(done) == {"counted": [1]}
        assert await count_tasks(client) == 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_streaming_retry_gets_the_current_task_then_live_events(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient, binding: str
) -> None:
    label = uuid.uuid4().hex
    message = counting(label, seconds=0.5)
    async with node(apps, store_url, tmp_path / "node") as url:
        blocking = await make_client(http, url, binding=binding)
        started = await send(blocking, message, return_immediately=True)
        streaming = await make_client(http, url, binding=binding, streaming=True)
        events: list[StreamResponse] = [
            e async for e in streaming.send_message(SendMessageRequest(message=message))
        ]
        assert events[0].HasField("task")
        assert events[0].task.id == started.id
        assert events[0].task.status.state in (S.TASK_STATE_SUBMITTED, S.TASK_STATE_WORKING)
        last = events[-1]
        final = last.task if last.HasField("task") else last.status_update
        assert final.status.state == S.TASK_STATE_COMPLETED
        assert any(e.HasField("artifact_update") for e in events)
        # Once finished, a streamed retry is the task alone.
        again = [e async for e in streaming.send_message(SendMessageRequest(message=message))]
        assert len(again) == 1
        assert again[0].task.id == started.id
        assert again[0].task.status.state == S.TASK_STATE_COMPLETED
        assert RUNS[label] == 1
        assert await count_tasks(blocking) == 1


async def test_a_retry_after_a_restart_returns_the_first_task(
    apps: InProcessApps, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    label = uuid.uuid4().hex
    message = counting(label)
    async with node(apps, "sqlite", tmp_path / "node") as url:
        first = await send(await make_client(http, url), message)
    async with node(apps, "sqlite", tmp_path / "node") as url:  # the same data dir, a new app
        client = await make_client(http, url)
        retried = await send(client, message)
        assert retried.id == first.id
        assert retried.status.state == S.TASK_STATE_COMPLETED
        assert RUNS[label] == 1
        assert await count_tasks(client) == 1


async def test_a_repeated_follow_up_returns_the_task_instead_of_running_again(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    async with node(apps, store_url, tmp_path / "node") as url:
        client = await make_client(http, url)
        waiting = await send(client, skill_message("calculate", {}))
        assert waiting.status.state == S.TASK_STATE_INPUT_REQUIRED
        follow_up = text_message("2 ** 10", task=waiting)
        done = await send(client, follow_up)
        assert done.status.state == S.TASK_STATE_COMPLETED
        again = await send(client, follow_up)  # not -32004: it is the same message
        assert again.id == done.id
        assert again.status.state == S.TASK_STATE_COMPLETED
        assert again.artifacts == done.artifacts
        assert len(again.history) == len(done.history)


async def test_a_message_id_reused_for_other_content_is_invalid_params(
    apps: InProcessApps, store_url: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    first = counting(uuid.uuid4().hex)
    async with node(apps, store_url, tmp_path / "node") as url:
        client = await make_client(http, url)
        await send(client, first)
        response = await http.post(
            url + "/",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": first.message_id,
                        "role": "ROLE_USER",
                        "parts": [{"data": {"skill": "counted", "arguments": {"label": "x"}}}],
                    }
                },
            },
        )
        error = response.json()["error"]
        assert error["code"] == -32602
        assert "already used by a different message" in error["message"]
        assert await count_tasks(client) == 1
