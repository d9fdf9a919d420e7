"""The task lifecycle through the official a2a-sdk client, over JSON-RPC and HTTP+JSON."""

from __future__ import annotations

import asyncio
import json
import time
from typing import ClassVar

import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)

from node.card import parse_card
from node.client import artifacts_of, skill_message, status_text, text_message
from node.server.app import build_node_app
from node.tooling import Tool
from tests.server.conftest import make_client

BINDINGS = ["JSONRPC", "HTTP+JSON"]


async def send(client, message, **config) -> Task:
    request = SendMessageRequest(message=message)
    if config:
        request.configuration.CopyFrom(SendMessageConfiguration(**config))
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1
    return events[0].task


async def poll(client, task_id: str, states: set[int], timeout: float = 10.0) -> Task:
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if task.status.state in states:
            return task
        assert time.monotonic() < deadline, f"task stuck in {TaskState.Name(task.status.state)}"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_blocking_send_completes_with_the_tool_result(node_url, http, binding):
    client = await make_client(http, node_url, binding=binding)
    task = await send(client, skill_message("calculate", {"expression": "6 * 7"}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_of(task) == {"calculate": [42]}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_non_blocking_send_then_polling_reaches_completion(node_url, http, binding):
    client = await make_client(http, node_url, binding=binding)
    task = await send(client, skill_message("slow", {"seconds": 0.2}), return_immediately=True)
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    done = await poll(client, task.id, {TaskState.TASK_STATE_COMPLETED})
    assert artifacts_of(done) == {"slow": ["waited 0.2s"]}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_streamed_send_reports_the_lifecycle_in_order(node_url, http, binding):
    client = await make_client(http, node_url, binding=binding, streaming=True)
    request = SendMessageRequest(message=skill_message("text_stats", {"text": "One. Two three."}))
    kinds, states, progress = [], [], []
    async for event in client.send_message(request):
        kind = event.WhichOneof("payload")
        kinds.append(kind)
        if kind == "task":
            states.append(event.task.status.state)
        elif kind == "status_update":
            states.append(event.status_update.status.state)
            progress.extend(p.text for p in event.status_update.status.message.parts if p.text)
    assert kinds[0] == "task" and states[0] == TaskState.TASK_STATE_SUBMITTED
    assert TaskState.TASK_STATE_WORKING in states
    assert "artifact_update" in kinds
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert kinds.index("artifact_update") < len(kinds) - 1
    # one call: the working update carries no text, so clients that join every status message
    # (crewAI) read only the result, which the completed one carries as text
    assert len(progress) == 1 and json.loads(progress[0])["words"] == 3


async def test_a_batch_reports_each_call_started_and_each_but_the_last_finished(node_url, http):
    from node.client import data_message

    client = await make_client(http, node_url, streaming=True)
    calls = [
        {"tool": "slow", "arguments": {"seconds": 0.01}},
        {"tool": "calculate", "arguments": {"expression": "1"}},
    ]
    request = SendMessageRequest(message=data_message({"calls": calls}))
    progress = [
        p.text
        async for event in client.send_message(request)
        if event.HasField("status_update")
        and event.status_update.status.state == TaskState.TASK_STATE_WORKING
        for p in event.status_update.status.message.parts
        if p.text
    ]
    # both are concurrency-safe, so both start; calculate finishes first; slow's "done" is
    # left to the terminal status
    assert progress[:2] == ["calling slow (1/2)", "calling calculate (2/2)"]
    assert len(progress) == 3
    assert progress[2].startswith("calculate done in") and progress[2].endswith("(1/2)")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancel_stops_a_long_running_tool(node_url, http, binding):
    client = await make_client(http, node_url, binding=binding)
    task = await send(client, skill_message("slow", {"seconds": 30}), return_immediately=True)
    await poll(client, task.id, {TaskState.TASK_STATE_WORKING})
    canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_list_tasks_pages_through_every_task(node_url, http, binding):
    client = await make_client(http, node_url, binding=binding)
    ids = set()
    for i in range(5):
        task = await send(client, skill_message("calculate", {"expression": f"{i} + 1"}))
        ids.add(task.id)
    seen, token = [], ""
    while True:
        page = await client.list_tasks(ListTasksRequest(page_size=2, page_token=token))
        assert page.total_size == 5
        seen.extend(t.id for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert len(seen) == 5 and set(seen) == ids


@pytest.mark.parametrize("binding", BINDINGS)
async def test_missing_arguments_ask_for_input_and_the_reply_continues_the_task(
    node_url, http, binding
):
    client = await make_client(http, node_url, binding=binding)
    task = await send(client, skill_message("calculate", {}))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    data = [p for p in task.status.message.parts if p.HasField("data")]
    assert data, "input-required must say what is missing"
    assert "expression" in status_text(task)
    follow_up = text_message("2 ** 10", task=task)
    done = await send(client, follow_up)
    assert done.id == task.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert artifacts_of(done) == {"calculate": [1024]}


async def test_text_with_metadata_skill_fills_the_single_string_parameter(node_url, http):
    client = await make_client(http, node_url)
    task = await send(client, text_message("1 + 2", skill="calculate"))
    assert artifacts_of(task) == {"calculate": [3]}


async def test_a_batch_of_calls_returns_one_artifact_per_call_in_order(node_url, http):
    from node.client import data_message

    client = await make_client(http, node_url)
    calls = [
        {"tool": "calculate", "arguments": {"expression": "1+1"}},
        {"tool": "json_query", "arguments": {"expression": "a", "data": {"a": 5}}},
    ]
    task = await send(client, data_message({"calls": calls}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.name for a in task.artifacts] == ["calculate", "json_query"]
    assert artifacts_of(task) == {"calculate": [2], "json_query": [5]}


async def test_a_message_matching_no_skill_is_offered_skills_to_choose(node_url, http):
    client = await make_client(http, node_url)
    task = await send(client, text_message("hello"))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    text = status_text(task)
    assert "No skill matches" in text and "metadata.skill" in text


async def test_tool_failure_fails_the_task_with_a_readable_reason(node_url, http):
    client = await make_client(http, node_url)
    task = await send(client, skill_message("calculate", {"expression": "1 / 0"}))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "calculate" in status_text(task) and "zero" in status_text(task).lower()


async def test_large_outputs_are_stored_whole_as_an_artifact(start_node, http):
    url = await start_node(
        tools=[{"name": "text_stats"}, {"name": "json_query", "max_output": 100}]
    )
    client = await make_client(http, url)
    data = {"items": list(range(500))}
    task = await send(client, skill_message("json_query", {"expression": "items", "data": data}))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    found = artifacts_of(task)
    assert "json_query.full-output" in found
    assert len(found["json_query.full-output"][0]) > 1000
    assert "truncated" in found["json_query"][0]


async def test_healthz_and_readyz(node_url, http):
    assert (await http.get(f"{node_url}/healthz")).json()["status"] == "ok"
    assert (await http.get(f"{node_url}/readyz")).json()["ready"] is True


class BrokenPolicy(Tool):
    """A tool whose policy raises when read: stands in for a bug inside the node itself."""

    name = "broken"
    description = "Its requires property is broken."
    parameters: ClassVar[dict] = {"type": "object", "properties": {}}

    armed = False  # set once registered, so only the executor's read fails

    @property
    def requires(self) -> frozenset[str]:  # type: ignore[override]
        if self.armed:
            raise RuntimeError("secret internal detail")
        return frozenset()

    async def execute(self, arguments, ctx):
        return "never"


async def test_an_internal_bug_fails_the_task_with_an_error_id_and_logs_the_traceback(
    apps, http, tmp_path, caplog
):
    card = parse_card({"id": "buggy", "name": "Buggy", "description": "d"}, env={})
    broken = BrokenPolicy()
    url = await apps.start(
        lambda u: build_node_app(
            card, public_url=u, data_dir=tmp_path, store="memory", tools=[broken]
        )
    )
    client = await make_client(http, url)
    broken.armed = True
    with caplog.at_level("ERROR", logger="node.executor"):
        task = await send(client, skill_message("broken", {}))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    text = status_text(task)
    assert text.startswith("internal error (error id ")
    error_id = text.removeprefix("internal error (error id ").rstrip(")")
    (record,) = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info is not None
    assert "secret internal detail" not in text
