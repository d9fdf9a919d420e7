"""``a2a-node watch`` and ``send --follow``: a real CLI process following real nodes' tasks.

The watched tasks wait on a gate the test opens once the CLI shows them working, so the CLI is
seen following a live stream, not reading a task that had already ended.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.types import StreamResponse, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import ParseDict
from rich.console import Console

from node import call_log
from node.card import load_card, parse_card
from node.cli.watch import CALLS_KEY, TaskProgress
from node.client import NodeClient, skill_message
from node.peers.settings import StaticPeer
from node.server.app import build_node_app
from tests.cli.clisupport import CARDS, DATA_CARD, Running, cli, running
from tests.cli.gates import gate, gate_then_fail, gated


@pytest.fixture
async def data_node(serve, tmp_path: Path) -> str:
    """The data card's node plus the gate tools, on a free loopback port."""
    card = load_card(DATA_CARD)
    return str(
        await serve(
            lambda u: build_node_app(
                card,
                public_url=u,
                data_dir=tmp_path,
                store="memory",
                tools=[gate, gate_then_fail],
            )
        )
    )


async def start(url: str, skill: str, name: str) -> str:
    """Submit ``skill(name=name)`` without waiting; the task's id."""
    async with NodeClient.connect(url, streaming=False) as node:
        async for event in node.events(
            skill_message(skill, {"name": name}), return_immediately=True
        ):
            return event.task.id
    raise AssertionError("no task")


async def ended(run: Running, timeout: float = 30.0) -> tuple[int, str, str]:
    """Wait for the CLI to exit by itself: (exit code, stdout, stderr)."""
    proc = run.proc
    assert proc.stdout is not None and proc.stderr is not None
    out, err = await asyncio.wait_for(
        asyncio.gather(proc.stdout.read(), proc.stderr.read()), timeout
    )
    code = await asyncio.wait_for(proc.wait(), timeout)
    return code, "".join(run.out) + out.decode(), "".join(run.err) + err.decode()


async def test_watch_follows_a_task_to_completion(data_node):
    async with gated("green") as opened:
        task_id = await start(data_node, "gate", "green")
        async with running("watch", data_node, task_id) as run:
            await run.wait_for_line(f"task {task_id}: working", stream="err")
            opened.set()
            code, out, err = await ended(run)
    assert code == 0, err
    assert out == "--- gate\ngreen opened\n"
    assert f"task {task_id}: completed" in err


async def test_watch_of_a_failing_task_exits_1_with_the_reason(data_node):
    async with gated("red") as opened:
        task_id = await start(data_node, "gate_then_fail", "red")
        async with running("watch", data_node, task_id) as run:
            await run.wait_for_line(f"task {task_id}: working", stream="err")
            opened.set()
            code, out, err = await ended(run)
    assert code == 1, err
    assert f"task {task_id}: failed" in err and "the red gauge broke" in err
    assert out.startswith("--- gate_then_fail.error\n")  # the failed call's record


async def test_watch_of_an_unknown_task_is_one_line(data_node):
    code, _, err = await cli("watch", data_node, "no-such-task", "--timeout", "20")
    assert code == 1 and "TaskNotFoundError" in err and "Traceback" not in err


def test_watch_reads_the_key_the_node_writes():
    assert CALLS_KEY == call_log.CALLS_KEY


def test_the_live_panel_shows_state_messages_and_calls():
    """What a terminal shows (rendered here to a recording console: tests have no TTY)."""
    progress = TaskProgress(live=True)
    update = TaskStatusUpdateEvent(task_id="t-1", context_id="c-1")
    update.status.state = TaskState.TASK_STATE_WORKING
    call = {
        "tool": "data__calculate",
        "peer": "data",
        "remote_task_id": "r-9",
        "started_at": "2026-12-01T21:00:00Z",
        "duration_ms": 31.0,
        "outcome": "error",
        "error": "division by zero",
        "trace_id": None,
    }
    update.metadata.CopyFrom(ParseDict({CALLS_KEY: [call]}, update.metadata))
    progress.event(StreamResponse(status_update=update))
    console = Console(record=True, force_terminal=True, width=120)
    console.print(progress)
    shown = console.export_text()
    assert "task t-1" in shown and "working" in shown
    assert "data__calculate" in shown and "r-9" in shown and "division by zero" in shown
    assert "31 ms" in shown


async def test_send_follow_shows_the_peer_call_of_a_pipeline(serve, tmp_path):
    data = await serve(
        lambda u: build_node_app(
            load_card(DATA_CARD), public_url=u, data_dir=tmp_path / "data", store="memory"
        )
    )
    coordinator_card = load_card(CARDS / "coordinator.yaml")
    peers = coordinator_card.peers.model_copy(update={"static": [StaticPeer(url=data)]})
    coordinator_card = coordinator_card.model_copy(update={"peers": peers})
    coordinator = await serve(
        lambda u: build_node_app(
            coordinator_card, public_url=u, data_dir=tmp_path / "coord", store="memory"
        )
    )
    code, out, err = await cli(
        "send", coordinator, "--skill", "compute", "--arg", "expression=6*7", "--follow"
    )
    assert code == 0, err
    assert "42" in out
    assert "call data__calculate → data" in err and ": ok in " in err

    code, out, err = await cli(
        "send", coordinator, "--skill", "compute", "--arg", "expression=1/0", "--follow"
    )
    assert code == 1, err
    assert "call data__calculate → data" in err and ": error in " in err
    assert "division" in err.lower()


async def test_watch_shows_a_peer_call_as_it_finishes_while_the_task_runs(serve, tmp_path):
    """A pipeline on the coordinator calls the data node twice: the first call's record shows
    while the second still waits on its gate."""
    data = await serve(
        lambda u: build_node_app(
            load_card(DATA_CARD),
            public_url=u,
            data_dir=tmp_path / "data",
            store="memory",
            tools=[gate],
        )
    )
    coordinator_card = parse_card(
        {
            "id": "coordinator",
            "name": "Coordinator",
            "description": "Calls the data node.",
            "pipelines": [
                {
                    "id": "compute_then_wait",
                    "description": "Compute on the data node, then wait on its gate.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                    "steps": [
                        {
                            "id": "sum",
                            "tool": "data__calculate",
                            "arguments": {"expression": "6*7"},
                        },
                        {"id": "wait", "tool": "data__gate", "arguments": {"name": "$input/name"}},
                    ],
                    "output": ["sum", "wait"],
                }
            ],
            "peers": {"static": [{"url": data}]},
        }
    )
    coordinator = await serve(
        lambda u: build_node_app(
            coordinator_card, public_url=u, data_dir=tmp_path / "coord", store="memory"
        )
    )
    async with gated("amber") as opened:
        task_id = await start(coordinator, "compute_then_wait", "amber")
        async with running("watch", coordinator, task_id) as run:
            line = await run.wait_for_line("call data__calculate → data", stream="err")
            assert "(remote task " in line and ": ok in " in line
            opened.set()
            code, out, err = await ended(run)
    assert code == 0, err
    assert "call data__gate → data" in err and f"task {task_id}: completed" in err
    assert "42" in out and "amber opened" in out


def test_the_plain_lines_are_one_per_change_in_a_fixed_format(capsys):
    progress = TaskProgress(live=False)
    call = {"tool": "calculate", "peer": None, "remote_task_id": None, "duration_ms": 1500.0}
    call |= {"started_at": "2026-12-01T21:00:00Z", "outcome": "ok", "error": None}
    for state, text, calls in (
        (TaskState.TASK_STATE_SUBMITTED, "", []),
        (TaskState.TASK_STATE_WORKING, "calling calculate", []),
        (TaskState.TASK_STATE_WORKING, "calling calculate", [call]),
        (TaskState.TASK_STATE_WORKING, "calculate done", [call]),  # the same call again
        (TaskState.TASK_STATE_COMPLETED, "", [call]),
    ):
        update = TaskStatusUpdateEvent(task_id="t-1", context_id="c-1")
        update.status.state = state
        if text:
            update.status.message.parts.add(text=text)
        update.metadata.CopyFrom(ParseDict({CALLS_KEY: calls}, update.metadata))
        progress.event(StreamResponse(status_update=update))
    assert capsys.readouterr().err == (
        "task t-1: submitted\n"
        "task t-1: working\n"
        "  … calling calculate\n"
        "  call calculate: ok in 1.50 s\n"
        "  … calculate done\n"
    )  # the final state is printed with the task's results, as `get` prints it
