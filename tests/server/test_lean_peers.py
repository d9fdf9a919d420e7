"""The lean path for calls that wait on peers: same tasks as the SDK path, visible while they run.

A real a2a-sdk peer (``tests.peers.peers_support``: ``add``, ``fail``, ``ask``, ``shout``, ``slow``)
runs on loopback; two coordinators from one card (lean path on and off, each its own SQLite
file, real uvicorn servers) call it as tools: the peer's skills exposed as their own, pipelines
over them, batches mixing them with local tools. Every request goes to both through the a2a-sdk
client and the answers, ids and timestamps blanked, must be equal; ``LEAN`` counts the sends the
lean path served, so a case meant for it cannot pass by comparing the SDK path with itself.
While a lean peer call runs, its task is stored WORKING (ListTasks, GetTask), CancelTask stops
it with the same tasks as the SDK path (on both paths the cancelled peer call then cancels the
peer's own task: ``tests/peers/test_cancel_forwarded.py``), SubscribeToTask gets the
current task then the final one, a retried messageId gets the same task, and (PostgreSQL) a
cancel through another replica stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.server.context import ServerCallContext
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from node.card import parse_card
from node.client import data_message, skill_message
from node.server import lean_path
from node.server.app import NodeState, build_node_app
from node.server.lean_path import LeanPath
from tests.peers.peers_support import Recorder, eventually, peer_app, peer_card
from tests.server.conftest import make_client
from tests.server.test_edge_guard import fresh_schema
from tests.server.test_lean_path import Blank, errors_or, outcome, same_message, send
from tests.servers import free_socket, running, url_of

LEAN: Counter[str] = Counter()
Serve = Callable[..., Awaitable[str]]
PORT = re.compile(r"127\.0\.0\.1:\d+")
WORKING = TaskState.TASK_STATE_WORKING


@pytest.fixture(autouse=True)
def count_lean_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    LEAN.clear()
    lean_send = LeanPath.send

    async def counted(
        self: LeanPath, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | None:
        task = await lean_send(self, params, context)
        LEAN["served" if task is not None else "declined"] += 1
        return task

    monkeypatch.setattr(LeanPath, "send", counted)


@pytest.fixture
async def peer() -> AsyncIterator[tuple[str, Recorder]]:
    """A plain a2a-sdk peer "b" on loopback, and what it received."""
    sock = free_socket()
    recorder = Recorder()
    app = peer_app(peer_card(url_of(sock)), recorder)
    async with running(app, sock) as url:
        yield url, recorder


def step(step_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"id": step_id, "tool": tool, "arguments": arguments}


def pipeline(pipeline_id: str, steps: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    return {
        "id": pipeline_id,
        "description": f"The {pipeline_id} pipeline.",
        "input_schema": more.pop("input_schema", schema),
        "steps": steps,
        **more,
    }


PIPELINES = [
    pipeline("sum", [step("s", "b__add", a="$input/a", b="$input/b")]),
    pipeline(
        "mixed",
        [step("s", "b__add", a="$input/a", b="$input/b"), step("c", "calculate", expression="6*7")],
        output=["s", "c"],
    ),
    pipeline("broken", [step("f", "b__fail")]),
    pipeline(
        "stats",
        [step("t", "text_stats", text="$input/text"), step("s", "b__add", a=1, b=2)],
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        output=["t", "s"],
    ),
]


async def coordinator(
    serve: Serve,
    root: Path,
    peer_url: str,
    lean: bool,
    store: str,
    states: dict[str, NodeState] | None = None,
) -> str:
    """A coordinator exposing peer b's skills, with :data:`PIPELINES`; its URL once b is known.

    ``states`` receives its app state under its data directory's name.
    """
    card = parse_card(
        {
            "id": "coord",
            "name": "Coordinator",
            "description": "Calls peer b.",
            "tools": ["calculate", "text_stats"],
            "pipelines": PIPELINES,
            "peers": {
                "static": [{"url": peer_url, "expose": True}],
                "refresh_s": 60,
                "call_timeout_s": 20,
            },
            "server": {"lean_path": lean},
        },
        env={},
    )
    name = f"{lean}-{len(states or ())}"

    def factory(u: str) -> Any:
        app = build_node_app(card, public_url=u, data_dir=root / name, store=store)
        if states is not None:
            states[name] = app.state.node
        return app

    url = await serve(factory)
    async with httpx.AsyncClient(timeout=5.0) as http:

        async def knows_b() -> bool:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            return "b__add" in {s["id"] for s in card["skills"]}

        await eventually(knows_b, within=10.0)
    return url


@contextlib.asynccontextmanager
async def twins(
    serve: Serve, root: Path, peer_url: str, *, store: str = "sqlite", streaming: bool = False
) -> AsyncIterator[dict[bool, Client]]:
    """A client of each coordinator: lean path on (True) and off (False)."""
    async with httpx.AsyncClient(timeout=30.0) as http:
        clients = {}
        for lean in (True, False):
            url = await coordinator(serve, root, peer_url, lean, store)
            clients[lean] = await make_client(http, url, streaming=streaming)
        yield clients


def blanked(blank: Blank, value: Any) -> Any:
    return blank(PORT.sub("<host>", value) if isinstance(value, str) else value)


def assert_same(answers: dict[bool, list[Any]], names: list[str]) -> None:
    on, off = Blank(), Blank()
    for name, a, b in zip(names, answers[True], answers[False], strict=True):
        assert blanked(on, a) == blanked(off, b), name


CASES: list[tuple[str, Any, dict[str, Any], bool]] = [
    # (case, message, configuration, served by the lean path)
    ("peer skill", skill_message("b__add", {"a": 1, "b": 2}), {}, True),
    ("peer failure", skill_message("b__fail", {}), {}, True),
    ("peer asks for input", skill_message("b__ask", {}), {}, True),
    ("peer without a schema", skill_message("b__shout", {"text": "hi"}), {}, True),
    ("pipeline over a peer", skill_message("sum", {"a": 2, "b": 3}), {}, True),
    ("pipeline, peer and local steps", skill_message("mixed", {"a": 2, "b": 3}), {}, True),
    ("pipeline, failing peer step", skill_message("broken", {}), {}, True),
    (
        "batch: peer and local",
        data_message(
            {
                "calls": [
                    {"tool": "b__add", "arguments": {"a": 1, "b": 1}},
                    {"tool": "calculate", "arguments": {"expression": "2+2"}},
                ]
            }
        ),
        {},
        True,
    ),
    ("historyLength 0", skill_message("b__add", {"a": 3, "b": 4}), {"history_length": 0}, True),
    ("pipeline with a thread step", skill_message("stats", {"text": "a b"}), {}, False),
    ("peer, invalid arguments", skill_message("b__add", {"a": "x", "b": 1}), {}, False),
    (
        "return immediately",
        skill_message("b__add", {"a": 5, "b": 6}),
        {"return_immediately": True},
        False,
    ),
]


async def test_peer_and_pipeline_calls_give_the_same_tasks_on_both_paths(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder]
) -> None:
    answers: dict[bool, list[Any]] = {True: [], False: []}
    async with twins(serve, tmp_path, peer[0]) as client:
        for _, message, config, _ in CASES:
            fresh = same_message(message)
            for lean in (True, False):
                answers[lean].append(await outcome(client[lean], fresh(), **config))
        for lean in (True, False):  # and as stored
            for task in list(answers[lean]):
                if isinstance(task, Task):
                    answers[lean].append(await client[lean].get_task(GetTaskRequest(id=task.id)))
    assert LEAN["served"] == sum(1 for *_, lean in CASES if lean), LEAN
    assert_same(answers, [case for case, *_ in CASES] + ["stored"] * len(CASES))
    states = [t.status.state for t in answers[True][: len(CASES)] if isinstance(t, Task)]
    assert TaskState.TASK_STATE_COMPLETED in states and TaskState.TASK_STATE_FAILED in states


async def working_task(client: Client) -> Task:
    """The one WORKING task the client's node lists (polled until it is stored)."""
    found: list[Task] = []

    async def listed() -> bool:
        page = await client.list_tasks(ListTasksRequest(page_size=10))
        found[:] = [t for t in page.tasks if t.status.state == WORKING]
        return bool(found)

    await eventually(listed, within=10.0)
    assert len(found) == 1
    return found[0]


async def test_a_lean_peer_call_is_visible_and_cancelable_like_the_sdk_path(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder]
) -> None:
    answers: dict[bool, list[Any]] = {True: [], False: []}
    slow = same_message(skill_message("b__slow", {}))
    async with twins(serve, tmp_path, peer[0]) as client:
        for lean in (True, False):
            log = answers[lean]
            sending = asyncio.create_task(send(client[lean], slow()))
            running_task = await working_task(client[lean])
            log.append(running_task)
            log.append(await client[lean].get_task(GetTaskRequest(id=running_task.id)))
            assert not sending.done()  # the peer's slow tool runs until cancelled
            log.append(await client[lean].cancel_task(CancelTaskRequest(id=running_task.id)))
            log.append(await asyncio.wait_for(sending, 10))  # the blocked sender's answer
            log.append(await client[lean].get_task(GetTaskRequest(id=running_task.id)))
            again = client[lean].cancel_task(CancelTaskRequest(id=running_task.id))
            log.append(await errors_or(again))
    assert LEAN["served"] == 1, LEAN
    assert answers[True][3].status.state == TaskState.TASK_STATE_CANCELED
    assert_same(answers, ["listed", "get", "cancel", "sender", "get after", "cancel again"])


async def test_subscribing_to_a_lean_peer_call_gets_the_current_then_the_final_task(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder]
) -> None:
    url = await coordinator(serve, tmp_path, peer[0], True, "sqlite")
    async with httpx.AsyncClient(timeout=30.0) as http:
        client = await make_client(http, url)
        streaming = await make_client(http, url, streaming=True)
        sending = asyncio.create_task(send(client, skill_message("b__slow", {})))
        task = await working_task(client)
        events: list[Any] = []

        async def subscribe() -> None:
            async for event in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                events.append(event)

        subscribed = asyncio.create_task(subscribe())
        await eventually(lambda: bool(events))
        await client.cancel_task(CancelTaskRequest(id=task.id))
        await asyncio.wait_for(subscribed, 10)
        final = await asyncio.wait_for(sending, 10)
    assert LEAN["served"] == 1, LEAN
    states = [event.task.status.state for event in events]
    assert states == [WORKING, TaskState.TASK_STATE_CANCELED]
    assert events[-1].task == final


async def test_a_retried_message_id_gets_the_running_lean_task(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder]
) -> None:
    url = await coordinator(serve, tmp_path, peer[0], True, "memory")
    async with httpx.AsyncClient(timeout=30.0) as http:
        client = await make_client(http, url)
        message = skill_message("b__slow", {})
        message.message_id = "retried-once"
        first = asyncio.create_task(send(client, same_message(message)()))
        task = await working_task(client)
        retry = asyncio.create_task(send(client, same_message(message)()))
        await client.cancel_task(CancelTaskRequest(id=task.id))
        answers = await asyncio.wait_for(asyncio.gather(first, retry), 10)
    assert [a.id for a in answers] == [task.id, task.id]
    assert answers[0] == answers[1]
    assert len(peer[1].metadata) == 1  # the peer was called once


PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_a_cancel_through_another_replica_stops_a_lean_peer_call(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder]
) -> None:
    """Replicas A and B on one PostgreSQL schema: the lean task on A is listed, followed and
    canceled through B; A's calls stop and its sender gets the canceled task."""
    states: dict[str, NodeState] = {}
    async with fresh_schema(PG_URL) as store, httpx.AsyncClient(timeout=30.0) as http:
        a_url = await coordinator(serve, tmp_path, peer[0], True, store, states)
        b_url = await coordinator(serve, tmp_path, peer[0], True, store, states)
        on_a, on_b = await make_client(http, a_url), await make_client(http, b_url)
        following = await make_client(http, b_url, streaming=True)
        sending = asyncio.create_task(send(on_a, skill_message("b__slow", {})))
        task = await working_task(on_b)  # stored by A, listed by B
        lean = states["True-0"].handler.lean  # type: ignore[union-attr]
        assert lean is not None and lean.running(task.id) is not None
        events: list[Any] = []

        async def subscribe() -> None:
            async for event in following.subscribe(SubscribeToTaskRequest(id=task.id)):
                events.append(event)

        subscribed = asyncio.create_task(subscribe())
        await eventually(lambda: bool(events))
        canceled = await on_b.cancel_task(CancelTaskRequest(id=task.id))
        final = await asyncio.wait_for(sending, 10)  # A stopped its calls at B's notice
        await asyncio.wait_for(subscribed, 10)
        stored = await on_a.get_task(GetTaskRequest(id=task.id))
    assert LEAN["served"] == 1, LEAN
    assert canceled.status.state == final.status.state == TaskState.TASK_STATE_CANCELED
    assert final == stored == canceled
    assert lean.running(task.id) is None
    assert events[0].task.status.state == WORKING
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED


@pytest.fixture
def held_working_save(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """The lean path's WORKING saves, due at once, wait until the returned event is set."""
    monkeypatch.setattr(lean_path, "VISIBLE_AFTER_S", 0.0)
    release = asyncio.Event()
    save = LeanPath._save

    async def held(self: LeanPath, task: Task, *args: Any) -> Any:
        if task.status.state == WORKING:
            await release.wait()
        return await save(self, task, *args)

    monkeypatch.setattr(LeanPath, "_save", held)
    return release


async def test_a_read_only_peer_call_goes_out_while_its_working_save_commits(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder], held_working_save: asyncio.Event
) -> None:
    """The WORKING save runs beside the call (off the hop's path); the answer waits for it."""
    url = await coordinator(serve, tmp_path, peer[0], True, "sqlite")
    async with httpx.AsyncClient(timeout=30.0) as http:
        client = await make_client(http, url)
        sending = asyncio.create_task(send(client, skill_message("b__add", {"a": 2, "b": 5})))
        await eventually(lambda: bool(peer[1].metadata))  # the peer has the call, save held
        await asyncio.sleep(0)
        assert not sending.done()  # the terminal save waits for the WORKING one
        held_working_save.set()
        task = await asyncio.wait_for(sending, 10)
        stored = await client.get_task(GetTaskRequest(id=task.id))
    assert LEAN["served"] == 1, LEAN
    assert task.status.state == stored.status.state == TaskState.TASK_STATE_COMPLETED
    assert task == stored


async def test_a_failed_working_save_beside_the_call_fails_the_send_and_stores_nothing(
    serve: Serve, tmp_path: Path, peer: tuple[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    save = LeanPath._save

    async def failing(self: LeanPath, task: Task, *args: Any) -> Any:
        if task.status.state == WORKING:
            raise OSError("disk full")
        return await save(self, task, *args)

    monkeypatch.setattr(LeanPath, "_save", failing)
    monkeypatch.setattr(lean_path, "VISIBLE_AFTER_S", 0.0)
    url = await coordinator(serve, tmp_path, peer[0], True, "sqlite")
    async with httpx.AsyncClient(timeout=30.0) as http:
        client = await make_client(http, url)
        answer = await outcome(client, skill_message("b__add", {"a": 1, "b": 1}))
        page = await client.list_tasks(ListTasksRequest(page_size=10))
    assert LEAN["served"] == 0, LEAN  # the send ended in an error, not a task
    assert isinstance(answer, str) and "Error" in answer, answer
    assert list(page.tasks) == []


@pytest.mark.parametrize("store", ["sqlite", "memory"])
async def test_a_quick_peer_call_is_saved_once_terminal(
    serve: Serve,
    tmp_path: Path,
    peer: tuple[str, Recorder],
    monkeypatch: pytest.MonkeyPatch,
    store: str,
) -> None:
    """Calls done before the WORKING save is due skip it; the task is stored as on the SDK path."""
    monkeypatch.setattr(lean_path, "VISIBLE_AFTER_S", 30.0)
    saved: list[int] = []
    save = LeanPath._save

    async def counted(self: LeanPath, task: Task, *args: Any) -> Any:
        saved.append(task.status.state)
        return await save(self, task, *args)

    monkeypatch.setattr(LeanPath, "_save", counted)
    answers: dict[bool, list[Any]] = {True: [], False: []}
    message = same_message(skill_message("sum", {"a": 2, "b": 3}))
    async with twins(serve, tmp_path, peer[0], store=store) as client:
        for lean in (True, False):
            task = await send(client[lean], message())
            answers[lean] += [task, await client[lean].get_task(GetTaskRequest(id=task.id))]
    assert LEAN["served"] == 1, LEAN
    assert saved == [TaskState.TASK_STATE_COMPLETED]
    assert_same(answers, ["answer", "stored"])
