"""Two replicas of one node behind a real HAProxy (round robin), on one PostgreSQL store.

The replicas advertise the balancer's URL (``--public-url``), so every call of a client goes
through HAProxy and lands on either replica. HAProxy comes from Debian (``apt-get install
haproxy``; ``.ci/run`` installs it); it runs in the foreground and is stopped by the test.
"""

from __future__ import annotations

import asyncio
import contextlib
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


@contextlib.asynccontextmanager
async def balanced_replicas(
    tmp: Path, pg_url: str, haproxy: str
) -> AsyncIterator[tuple[Balanced, Replica, Replica]]:
    """Two replicas of one card on a fresh schema, behind HAProxy; both UP when this yields.

    Also used by ``bench/replicas_lb.py``."""
    port, stats = _port(), _port()
    url = f"http://127.0.0.1:{port}"
    card = tmp / "card.yaml"
    card.write_text(CARD)
    async with fresh_schema(pg_url) as store:
        a = Replica(card, tmp / "a", store, "--public-url", url)
        b = Replica(card, tmp / "b", store, "--public-url", url)
        config = tmp / "haproxy.cfg"
        config.write_text(CONFIG.format(port=port, stats=stats, a=a.port, b=b.port))
        proxy = subprocess.Popen(
            [haproxy, "-db", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            await a.start()
            await b.start()
            await wait_until_ready(url, "/readyz", timeout=10)
            balancer = Balanced(url, f"http://127.0.0.1:{stats}")
            deadline = time.monotonic() + 20  # both replicas pass HAProxy's health check
            while (await _up(balancer)) < 2:
                assert time.monotonic() < deadline, "replicas not UP in HAProxy"
                await asyncio.sleep(0.1)
            yield balancer, a, b
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
            a.stop()
            b.stop()


@pytest.fixture
async def balanced(tmp_path: Path) -> AsyncIterator[Balanced]:
    assert PG_URL and HAPROXY  # the module's skip marks say so otherwise
    async with balanced_replicas(tmp_path, PG_URL, HAPROXY) as (balancer, _, _):
        yield balancer


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
