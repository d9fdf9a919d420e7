"""A node is a real process with a SQLite file: tasks survive restarts, and none stays working."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from a2a.types import TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from node.client import NodeClient, artifacts_of, skill_message, status_text, text_message
from tests.servers import free_socket, wait_until_ready

pytestmark = pytest.mark.network

CARD = """
id: restartable
name: Restartable
description: A node restarted under test.
tools: [calculate, http_fetch]
network:
  allow_cidrs: ["127.0.0.0/8"]
"""


class NodeProcess:
    def __init__(self, card: Path, data_dir: Path) -> None:
        sock = free_socket()
        self.port = sock.getsockname()[1]
        sock.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self.card, self.data_dir = card, data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "node.cli",
                "serve",
                str(self.card),
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        await wait_until_ready(self.url, "/readyz", timeout=20)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def node_process(tmp_path: Path) -> Iterator[NodeProcess]:
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    process = NodeProcess(card, tmp_path / "data")
    yield process
    process.kill()


@pytest.fixture
async def hanging_site(serve) -> AsyncIterator[str]:
    release = asyncio.Event()

    async def hang(_: Request) -> PlainTextResponse:
        await asyncio.wait_for(release.wait(), timeout=30)
        return PlainTextResponse("late")

    async def ok(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    url = await serve(lambda _: Starlette(routes=[Route("/hang", hang), Route("/healthz", ok)]))
    yield url
    release.set()


async def test_finished_and_input_required_tasks_survive_a_restart(node_process):
    await node_process.start()
    async with NodeClient.connect(node_process.url, streaming=False) as client:
        done = await client.call("calculate", {"expression": "40 + 2"})
        parked = await client.call("calculate", {})
    assert parked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    node_process.stop()

    await node_process.start()
    async with NodeClient.connect(node_process.url, streaming=False) as client:
        again = await client.get(done.id)
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifacts_of(again) == {"calculate": [42]}
        resumed = await client.send(text_message("6 * 7", task=parked))
        assert resumed.id == parked.id
        assert resumed.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifacts_of(resumed) == {"calculate": [42]}
    node_process.stop()


async def test_a_task_working_when_the_process_died_is_failed_on_restart(
    node_process, hanging_site
):
    await node_process.start()
    async with NodeClient.connect(node_process.url, streaming=False) as client:
        events = [
            e
            async for e in client.events(
                skill_message("http_fetch", {"url": f"{hanging_site}/hang"}),
                return_immediately=True,
            )
        ]
        task_id = events[0].task.id
        working = await client.wait_for_state(task_id, TaskState.TASK_STATE_WORKING)
        assert working.status.state == TaskState.TASK_STATE_WORKING
    node_process.kill()

    await node_process.start()
    async with NodeClient.connect(node_process.url, streaming=False) as client:
        task = await client.get(task_id)
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "restarted" in status_text(task)
    node_process.stop()
    assert os.path.exists(node_process.data_dir / "tasks.db")
