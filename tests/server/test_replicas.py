"""Two replicas of one node (real ``a2a-node serve`` processes) on one PostgreSQL store.

Each test gets a fresh schema (``?search_path=``), so the replicas share tables, the NOTIFY
channels and the replica lock only with each other. The slow tool is ``http_fetch`` of a local
page that hangs until the test releases it, and records when the fetching client went away.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, Task, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from node.client import NodeClient, skill_message, text_message
from tests.server.test_edge_guard import fresh_schema
from tests.servers import free_socket, wait_until_ready

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")
pytestmark = [
    pytest.mark.network,
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]
S = TaskState
CARD = """
id: replicated
name: Replicated
description: One node served by two replicas.
tools: [calculate, http_fetch]
network:
  allow_cidrs: ["127.0.0.0/8"]
"""


class Replica:
    def __init__(self, card: Path, data_dir: Path, store: str, *extra: str) -> None:
        sock = free_socket()
        self.port = sock.getsockname()[1]
        sock.close()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable, "-m", "node.cli", "serve", str(card), "--port", str(self.port),
            "--data-dir", str(data_dir), "--store", store, *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        await wait_until_ready(self.url, "/readyz", timeout=30)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
async def replicas(tmp_path: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    async with fresh_schema(PG_URL) as store:
        a = Replica(card, tmp_path / "a", store)
        b = Replica(card, tmp_path / "b", store)
        try:
            await a.start()
            await b.start()
            yield a, b
        finally:
            a.stop()
            b.stop()


@dataclass
class SlowPage:
    url: str
    release: asyncio.Event
    gone: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture
async def slow_page(serve) -> AsyncIterator[SlowPage]:
    page = SlowPage("", asyncio.Event())

    async def hang(request: Request) -> PlainTextResponse:
        deadline = time.monotonic() + 30
        while not page.release.is_set() and time.monotonic() < deadline:
            if await request.is_disconnected():
                page.gone.set()
                break
            await asyncio.sleep(0.02)
        return PlainTextResponse("late")

    async def ok(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    page.url = await serve(
        lambda _: Starlette(routes=[Route("/hang", hang), Route("/healthz", ok)])
    )
    yield page
    page.release.set()


async def start_slow(client: NodeClient, page: SlowPage) -> str:
    message = skill_message("http_fetch", {"url": f"{page.url}/hang"})
    events = [e async for e in client.events(message, return_immediately=True)]
    task_id = events[0].task.id
    working = await client.wait_for_state(task_id, S.TASK_STATE_WORKING)
    assert working.status.state == S.TASK_STATE_WORKING
    return task_id


async def stopped_listening(url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=1.0) as client:
        while time.monotonic() < deadline:
            try:
                await client.get(f"{url}/healthz")
            except httpx.TransportError:
                return
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{url} still listening after {timeout} s")


def state_of(event: object) -> int | None:
    for name in ("task", "status_update"):
        if event.HasField(name):  # type: ignore[attr-defined]
            return int(getattr(event, name).status.state)
    return None


async def test_subscribe_on_b_gets_a_events_in_order_and_closes(replicas, slow_page):
    a, b = replicas
    async with (
        NodeClient.connect(a.url, streaming=False) as on_a,
        NodeClient.connect(b.url) as on_b,
    ):
        task_id = await start_slow(on_a, slow_page)
        seen: list[int | None] = []
        kinds: list[str] = []

        async def follow() -> None:
            request = SubscribeToTaskRequest(id=task_id)
            async with aclosing(on_b.client.subscribe(request)) as stream:
                async for event in stream:
                    kinds.append(event.WhichOneof("payload") or "")
                    seen.append(state_of(event))
                    if len(seen) == 1:
                        slow_page.release.set()  # the snapshot is in: let A finish

        await asyncio.wait_for(follow(), 15)  # ends by itself on the final state
        assert kinds[0] == "task" and seen[0] == S.TASK_STATE_WORKING
        assert "artifact_update" in kinds
        assert seen[-1] == S.TASK_STATE_COMPLETED  # the last event is the final one
        assert kinds.index("artifact_update") < len(kinds) - 1
        done = await on_b.get(task_id)
        assert done.status.state == S.TASK_STATE_COMPLETED


async def test_cancel_on_b_stops_the_tool_on_a_and_stays_canceled(replicas, slow_page):
    a, b = replicas
    async with (
        NodeClient.connect(a.url, streaming=False) as on_a,
        NodeClient.connect(b.url) as on_b,
    ):
        task_id = await start_slow(on_a, slow_page)
        started = time.monotonic()
        canceled = await on_b.cancel(task_id)
        assert canceled.status.state == S.TASK_STATE_CANCELED
        await asyncio.wait_for(slow_page.gone.wait(), 5)  # A's fetch was stopped, promptly
        assert time.monotonic() - started < 2
        slow_page.release.set()
        for client in (on_a, on_b):
            task: Task = await client.get(task_id)
            assert task.status.state == S.TASK_STATE_CANCELED
        with pytest.raises(Exception, match="cannot be canceled"):
            await on_a.cancel(task_id)


async def test_a_late_message_to_a_finished_task_is_refused_on_every_replica(replicas):
    a, b = replicas
    async with NodeClient.connect(a.url, streaming=False) as on_a:
        parked = await on_a.call("calculate", {})  # input-required: continued through B
        assert parked.status.state == S.TASK_STATE_INPUT_REQUIRED
    async with NodeClient.connect(b.url, streaming=False) as on_b:
        done = await on_b.send(text_message("6 * 7", task=parked))
        assert done.status.state == S.TASK_STATE_COMPLETED
    for replica in (a, b):
        async with NodeClient.connect(replica.url, streaming=False) as client:
            with pytest.raises(Exception, match="terminal state"):
                await client.send(text_message("1 + 1", task=done))
            again = await client.get(done.id)
            assert again.status.state == S.TASK_STATE_COMPLETED
            assert len(again.history) == len(done.history)


async def test_a_killed_replicas_task_is_failed_by_the_other_within_its_lease(tmp_path, slow_page):
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    async with fresh_schema(PG_URL) as store:
        leased = f"{store}&lease_s=1.5"
        a = Replica(card, tmp_path / "a", leased)
        b = Replica(card, tmp_path / "b", leased)
        try:
            await a.start()
            await b.start()
            async with NodeClient.connect(b.url, streaming=False) as on_b:
                parked = await on_b.call("calculate", {})  # B's interrupted task: no lease
                async with NodeClient.connect(a.url, streaming=False) as on_a:
                    task_id = await start_slow(on_a, slow_page)
                    # A is alive: its lease is renewed, B fails nothing
                    alive = await on_b.wait_for_state(task_id, S.TASK_STATE_FAILED, timeout=3)
                    assert alive.status.state == S.TASK_STATE_WORKING
                a.stop(signal.SIGKILL)
                killed = time.monotonic()
                failed = await on_b.wait_for_state(task_id, S.TASK_STATE_FAILED, timeout=10)
                assert failed.status.state == S.TASK_STATE_FAILED
                assert "lease expired" in failed.status.message.parts[0].text
                assert time.monotonic() - killed < 1.5 + 1.5  # lease + one sweep period + slack
                again = await on_b.get(parked.id)
                assert again.status.state == S.TASK_STATE_INPUT_REQUIRED
        finally:
            a.stop()
            b.stop()


async def test_sigterm_lets_a_running_task_finish(replicas, slow_page):
    a, b = replicas
    async with NodeClient.connect(b.url, streaming=False) as on_b:
        async with NodeClient.connect(a.url, streaming=False) as on_a:
            task_id = await start_slow(on_a, slow_page)
        assert a.proc is not None
        a.proc.send_signal(signal.SIGTERM)
        await stopped_listening(a.url)  # A takes no more requests, but drains its task
        working = await on_b.get(task_id)
        assert working.status.state == S.TASK_STATE_WORKING
        assert a.proc.poll() is None
        slow_page.release.set()
        done = await on_b.wait(task_id, timeout=10)
        assert done.status.state == S.TASK_STATE_COMPLETED
        a.proc.wait(timeout=10)  # and then A exits
