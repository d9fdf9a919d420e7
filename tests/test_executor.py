"""NodeExecutor.execute driven directly: a real RequestContext, events through an SDK queue."""

from __future__ import annotations

from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct, Value

from node.errors import ToolExecutionError
from node.executor import ExecutorSettings, NodeExecutor
from node.peers.hops import HOP
from node.tooling import Toolbox, ToolCall, ToolContext, ToolRunner, tool

AGENT = "node-a"


class CollectingQueue(EventQueue):
    """The SDK's event queue interface, keeping every event in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    async def enqueue_event(self, event: Any) -> None:
        self.events.append(event)


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
async def broken(text: str) -> str:
    """Always fails."""
    raise ToolExecutionError(f"cannot handle {text!r}")


def make_executor() -> NodeExecutor:
    box = Toolbox([add, broken])
    skills = {t.name: t for t in (box.get("add"), box.get("broken")) if t is not None}
    return NodeExecutor(box, lambda: skills, ExecutorSettings(agent_id=AGENT))


def message(data: dict[str, Any], metadata: dict[str, Any] | None = None) -> Message:
    msg = Message(
        message_id="m-1", role=Role.ROLE_USER, parts=[Part(data=ParseDict(data, Value()))]
    )
    if metadata is not None:
        msg.metadata.CopyFrom(ParseDict(metadata, Struct()))
    return msg


async def execute(msg: Message) -> list[Any]:
    context = RequestContext(ServerCallContext(), request=SendMessageRequest(message=msg))
    queue = CollectingQueue()
    await make_executor().execute(context, queue)
    return queue.events


def final_state(events: list[Any]) -> TaskState.ValueType:
    updates = [e for e in events if isinstance(e, TaskStatusUpdateEvent)]
    assert updates, events
    return updates[-1].status.state


def final_text(events: list[Any]) -> str:
    last = [e for e in events if isinstance(e, TaskStatusUpdateEvent)][-1]
    return " ".join(p.text for p in last.status.message.parts if p.text)


def artifacts(events: list[Any]) -> dict[str, Any]:
    found = {}
    for event in events:
        if hasattr(event, "artifact") and event.HasField("artifact"):
            parts = event.artifact.parts
            found[event.artifact.name] = [MessageToDict(p) for p in parts]
    return found


async def test_a_skill_call_completes_with_its_result() -> None:
    events = await execute(message({"skill": "add", "arguments": {"a": 2, "b": 3}}))
    assert isinstance(events[0], Task)
    assert final_state(events) == TaskState.TASK_STATE_COMPLETED
    assert artifacts(events)["add"] == [{"data": 5}]


async def test_an_unknown_skill_is_rejected() -> None:
    events = await execute(message({"skill": "ad", "arguments": {}}))
    assert final_state(events) == TaskState.TASK_STATE_REJECTED
    assert "unknown skill 'ad'" in final_text(events)


async def test_a_missing_argument_asks_for_input() -> None:
    events = await execute(message({"skill": "add", "arguments": {"a": 1}}))
    assert final_state(events) == TaskState.TASK_STATE_INPUT_REQUIRED
    last = [e for e in events if isinstance(e, TaskStatusUpdateEvent)][-1]
    data = [MessageToDict(p)["data"] for p in last.status.message.parts if p.HasField("data")]
    assert data[0]["missing"] == ["b"]
    assert data[0]["pending"] == {"skill": "add", "arguments": {"a": 1}}


async def test_a_failing_tool_fails_the_task() -> None:
    events = await execute(message({"skill": "broken", "arguments": {"text": "x"}}))
    assert final_state(events) == TaskState.TASK_STATE_FAILED
    assert "broken: cannot handle 'x'" in final_text(events)
    assert artifacts(events)["broken.error"][0]["data"]["kind"] == "execution"


async def test_a_message_that_looped_back_is_rejected() -> None:
    hop = {HOP: {"chain": ["node-b", AGENT], "max_hops": 4}}
    events = await execute(message({"skill": "add", "arguments": {"a": 1, "b": 2}}, hop))
    assert final_state(events) == TaskState.TASK_STATE_REJECTED
    assert "loop: node-b → node-a → node-a" in final_text(events)
    assert "add" not in artifacts(events)


async def test_the_runner_runs_prepared_calls_without_preparing_them_again() -> None:
    box = Toolbox([add])
    runner = ToolRunner(box)
    call = ToolCall("add", '{"a": "2", "b": 5}')
    ctx = ToolContext()
    prepared = runner.prepare(call, ctx)
    assert prepared.arguments == {"a": 2, "b": 5}
    [result] = await runner.run_prepared([(call, prepared)], ctx)
    assert result.ok and result.output == 7
