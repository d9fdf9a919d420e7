"""A real node on loopback keeps answering /healthz while hostile tool calls run."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.types import Task, TaskState

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.server.app import build_node_app
from node.tooling.isolation import close_default_pool, default_pool
from tests.servers import free_socket, running
from tests.tooling.workloads import hog

pytestmark = pytest.mark.network

CATASTROPHIC = r"^(\w+\s?)*$"
GREP_TIMEOUT_S = 5.0
# A frozen event loop would hold a /healthz probe for the whole hostile call (until its timeout:
# 5 s for the grep, 0.5 s for the hog); the bounds sit well under that, and well over what a busy
# 2-core machine adds to one probe (0.28 s seen in CI while the hog's process took a core).
GREP_HEALTHZ_LIMIT_S = GREP_TIMEOUT_S / 10
HOG_HEALTHZ_LIMIT_S = hog.policy.timeout * 0.8


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[str]:
    card = parse_card(
        {
            "id": "hardened",
            "name": "Hardened",
            "description": "A node under hostile calls.",
            "tools": [{"name": "grep", "timeout": GREP_TIMEOUT_S}],
        },
        env={},
    )
    workspace = tmp_path / "data" / "workspace"
    workspace.mkdir(parents=True)
    line = "a" * 28 + "!\n"  # Python's re: 2^27 backtracking steps for every line
    for name in ("one.txt", "two.txt"):
        (workspace / name).write_text(line * 100_000)
    sock = free_socket()
    app = build_node_app(
        card, public_url=f"http://127.0.0.1:{sock.getsockname()[1]}", data_dir=tmp_path / "data",
        store="memory", tools=[hog],
    )  # fmt: skip
    try:
        async with running(app, sock) as url:
            yield url
    finally:
        close_default_pool()


async def healthz_latencies_while(call: asyncio.Task[Task], url: str) -> list[float]:
    """Probe /healthz back to back until ``call`` ends; each probe's latency in seconds."""
    latencies: list[float] = []
    async with httpx.AsyncClient(timeout=2.0) as http:
        while not call.done() or not latencies:
            start = time.perf_counter()
            response = await http.get(f"{url}/healthz")
            latencies.append(time.perf_counter() - start)
            assert response.status_code == 200
    return latencies


async def test_healthz_answers_while_a_catastrophic_grep_runs(node: str) -> None:
    async with NodeClient.connect(node, streaming=False) as client:
        start = time.monotonic()
        call = asyncio.create_task(client.call("grep", {"pattern": CATASTROPHIC, "glob": "*.txt"}))
        latencies = await healthz_latencies_while(call, node)
        task = await call
        elapsed = time.monotonic() - start
    assert max(latencies) < GREP_HEALTHZ_LIMIT_S, f"slowest /healthz {max(latencies):.3f} s"
    assert elapsed < GREP_TIMEOUT_S + 1.0
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    (found,) = artifacts_of(task)["grep"]
    assert (found["matches"], found["files_scanned"]) == ([], 2)


async def test_healthz_answers_while_a_process_isolated_hog_runs_then_it_times_out(
    node: str,
) -> None:
    await default_pool().start()
    async with NodeClient.connect(node, streaming=False) as client:
        start = time.monotonic()
        call = asyncio.create_task(client.call("hog"))
        latencies = await healthz_latencies_while(call, node)
        task = await call
        elapsed = time.monotonic() - start
    assert max(latencies) < HOG_HEALTHZ_LIMIT_S, f"slowest /healthz {max(latencies):.3f} s"
    assert elapsed < hog.policy.timeout + 1.0
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "timed out" in status_text(task)
    assert default_pool().busy == []
