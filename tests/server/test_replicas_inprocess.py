"""Two node apps in one process on one PostgreSQL schema: what a remote subscribe leaves behind.

The multi-process tests (test_replicas.py) cannot look inside a replica; here both replicas are
real uvicorn servers on loopback in this process, so the test can check replica B's event stream
and task registry after subscriptions to a task that runs on A.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import aclosing
from pathlib import Path

import pytest
from a2a.types import SubscribeToTaskRequest, TaskState

from node.card import parse_card
from node.client import NodeClient
from node.server.app import NodeState, build_node_app
from tests.server.test_edge_guard import fresh_schema
from tests.server.test_replicas import SlowPage, slow_page, start_slow

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]
S = TaskState
__all__ = ["slow_page"]  # the fixture, shared with test_replicas


async def test_remote_subscribes_leave_nothing_behind(serve, tmp_path: Path, slow_page: SlowPage):
    card = parse_card(
        {
            "id": "replicated",
            "name": "Replicated",
            "description": "two replicas in one process",
            "tools": ["http_fetch"],
            "network": {"allow_cidrs": ["127.0.0.0/8"]},
        },
        env={},
    )
    states: dict[str, NodeState] = {}

    def replica(name: str, store: str):
        def factory(url: str):
            app = build_node_app(card, public_url=url, data_dir=tmp_path / name, store=store)
            states[name] = app.state.node
            return app

        return factory

    async with fresh_schema(PG_URL) as store:
        a_url = await serve(replica("a", store), "/readyz")
        b_url = await serve(replica("b", store), "/readyz")
        b = states["b"]
        assert b.cluster is not None and b.handler is not None
        async with (
            NodeClient.connect(a_url, streaming=False) as on_a,
            NodeClient.connect(b_url) as on_b,
        ):
            task_id = await start_slow(on_a, slow_page)
            request = SubscribeToTaskRequest(id=task_id)
            for _ in range(5):  # subscribe on B, take the snapshot, hang up
                async with aclosing(on_b.client.subscribe(request)) as stream:
                    async for event in stream:
                        assert event.task.status.state == S.TASK_STATE_WORKING
                        break
            last: list[int] = []
            async with aclosing(on_b.client.subscribe(request)) as stream:
                async for event in stream:  # one more, followed to the end
                    slow_page.release.set()
                    if event.HasField("status_update"):
                        last.append(event.status_update.status.state)
            assert last[-1] == S.TASK_STATE_COMPLETED
        deadline = time.monotonic() + 5
        while b.cluster.stream.subscribers and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert b.cluster.stream.subscribers == 0  # every subscription's waiter is gone
        assert await b.handler._active_task_registry.get(task_id) is None  # no task object on B
