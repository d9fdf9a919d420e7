"""Two replicas of one node behind a real HAProxy (round robin), on one PostgreSQL store.

The replicas advertise the balancer's URL (``--public-url``), so every call of a client goes
through HAProxy and lands on either replica. HAProxy comes from Debian (``apt-get install
haproxy``; ``.ci/run`` installs it); it runs in the foreground and is stopped by the test.
"""

from __future__ import annotations

import asyncio
import csv
import io
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, TaskState

from node.client import NodeClient
from tests.server.test_edge_guard import fresh_schema
from tests.server.test_replicas import CARD, PG_URL, Replica, SlowPage, slow_page, start_slow
from tests.servers import free_socket, wait_until_ready

HAPROXY = shutil.which("haproxy") or ""
pytestmark = [
    pytest.mark.network,
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
    pytest.mark.skipif(not HAPROXY, reason="needs haproxy (apt-get install haproxy)"),
]
S = TaskState
__all__ = ["slow_page"]  # the fixture, shared with test_replicas

CONFIG = """
global
    maxconn 2048
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
frontend node
    bind 127.0.0.1:{port}
    default_backend replicas
frontend stats
    bind 127.0.0.1:{stats}
    stats enable
    stats uri /stats
backend replicas
    balance roundrobin
    option httpchk GET /readyz
    server a 127.0.0.1:{a} check inter 500ms
    server b 127.0.0.1:{b} check inter 500ms
"""


def _port() -> int:
    sock = free_socket()
    port: int = sock.getsockname()[1]
    sock.close()
    return port


class Balanced:
    def __init__(self, url: str, stats: str) -> None:
        self.url, self.stats = url, stats

    async def sessions(self) -> dict[str, int]:
        """Connections HAProxy opened to each replica so far."""
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"{self.stats}/stats;csv")).text.lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return {r["svname"]: int(r["stot"]) for r in rows if r["pxname"] == "replicas"}


@pytest.fixture
async def balanced(tmp_path: Path) -> AsyncIterator[Balanced]:
    port, stats = _port(), _port()
    url = f"http://127.0.0.1:{port}"
    card = tmp_path / "card.yaml"
    card.write_text(CARD)
    async with fresh_schema(PG_URL) as store:
        a = Replica(card, tmp_path / "a", store, "--public-url", url)
        b = Replica(card, tmp_path / "b", store, "--public-url", url)
        config = tmp_path / "haproxy.cfg"
        config.write_text(CONFIG.format(port=port, stats=stats, a=a.port, b=b.port))
        proxy = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await a.start()
            await b.start()
            await wait_until_ready(url, "/readyz", timeout=10)
            balancer = Balanced(url, f"http://127.0.0.1:{stats}")
            deadline = time.monotonic() + 10  # both replicas pass HAProxy's health check
            while (await _up(balancer)) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            yield balancer
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
            a.stop()
            b.stop()


AGGREGATES = {"FRONTEND", "BACKEND"}  # HAProxy's summary rows, not servers


async def _up(balancer: Balanced) -> int:
    """How many replica servers HAProxy's health checks say are UP."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{balancer.stats}/stats;csv")).text.lstrip("# ")
    rows = csv.DictReader(io.StringIO(text))
    servers = (r for r in rows if r["pxname"] == "replicas" and r["svname"] not in AGGREGATES)
    return sum(1 for r in servers if r["status"] == "UP")


async def test_every_task_sent_through_the_balancer_completes(balanced):
    async with NodeClient.connect(balanced.url, streaming=False) as client:
        tasks = await asyncio.gather(
            *(client.call("calculate", {"expression": f"{i} + 1"}) for i in range(60))
        )
        assert [t.status.state for t in tasks] == [S.TASK_STATE_COMPLETED] * 60
        again = await asyncio.gather(*(client.get(t.id) for t in tasks))
        assert [t.status.state for t in again] == [S.TASK_STATE_COMPLETED] * 60
    sessions = await balanced.sessions()
    assert sessions["a"] > 0 and sessions["b"] > 0  # both replicas served


async def test_subscribe_and_cancel_through_the_balancer(balanced, slow_page: SlowPage):
    async with (
        NodeClient.connect(balanced.url, streaming=False) as plain,
        NodeClient.connect(balanced.url) as streaming,
    ):
        # subscribe lands on either replica and still follows the task to its end
        task_id = await start_slow(plain, slow_page)
        states: list[int] = []
        request = SubscribeToTaskRequest(id=task_id)
        async with aclosing(streaming.client.subscribe(request)) as stream:
            async for event in stream:
                if event.HasField("task"):
                    states.append(event.task.status.state)
                    slow_page.release.set()
                elif event.HasField("status_update"):
                    states.append(event.status_update.status.state)
        assert states[0] == S.TASK_STATE_WORKING and states[-1] == S.TASK_STATE_COMPLETED

        # cancel lands on either replica and stops the fetch where it runs
        slow_page.release.clear()
        slow_page.gone.clear()
        task_id = await start_slow(plain, slow_page)
        canceled = await plain.cancel(task_id)
        assert canceled.status.state == S.TASK_STATE_CANCELED
        await asyncio.wait_for(slow_page.gone.wait(), 5)
        slow_page.release.set()
        for _ in range(4):  # read through both replicas
            assert (await plain.get(task_id)).status.state == S.TASK_STATE_CANCELED
