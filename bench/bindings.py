"""One node, three bindings: blocking SendMessage through the official client on each.

Run: ``.venv/bin/python bench/bindings.py [--sequential 300] [--concurrent 300] [--rounds 3]``

A node process (``a2a-node serve``, a card with ``calculate``, SQLite store, ``--grpc-port``) is
pinned to CPU0 with ``taskset``; this process (CPU1) opens one official client per binding
(``ClientFactory``: JSON-RPC and HTTP+JSON over one ``httpx.AsyncClient``, gRPC over one
``grpc.aio`` channel) and, per binding and round, sends ``--sequential`` messages one after the
other (median and p99 latency) and then ``--concurrent`` at once (``asyncio.gather``; wall time
and tasks/s). Every answer is checked: COMPLETED with its own result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc.aio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory  # noqa: E402
from a2a.types import SendMessageRequest, TaskState  # noqa: E402

from node.client import artifacts_of, skill_message  # noqa: E402

CARD = """
id: bindings
name: Bindings Node
description: A node measured on each binding.
tools: [calculate]
"""
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(url: str, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(url + "/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("node not ready")
            await asyncio.sleep(0.05)


async def one(client: Client, i: int) -> float:
    request = SendMessageRequest(message=skill_message("calculate", {"expression": f"{i} * 3"}))
    start = time.perf_counter()
    events = [event async for event in client.send_message(request)]
    took = time.perf_counter() - start
    task = events[-1].task
    if task.status.state != TaskState.TASK_STATE_COMPLETED or artifacts_of(task) != {
        "calculate": [i * 3]
    }:
        raise AssertionError(f"wrong answer for {i}: {task}")
    return took


async def measure(url: str, sequential: int, concurrent: int, rounds: int) -> None:
    limits = httpx.Limits(max_connections=concurrent, max_keepalive_connections=concurrent)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        for binding in BINDINGS:
            config = ClientConfig(
                streaming=False,
                httpx_client=http,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
            async with ClientFactory(config).create(card) as client:
                for i in range(30):  # warm-up: connections, caches
                    await one(client, i)
                for n in range(rounds):
                    latencies = [await one(client, i) for i in range(sequential)]
                    start = time.perf_counter()
                    await asyncio.gather(*(one(client, i) for i in range(concurrent)))
                    wall = time.perf_counter() - start
                    median = statistics.median(latencies) * 1000
                    p99 = statistics.quantiles(latencies, n=100)[98] * 1000
                    print(
                        f"  {binding:9} round {n + 1}: sequential median {median:.2f} ms, "
                        f"p99 {p99:.2f} ms; {concurrent} concurrent in {wall:.2f} s "
                        f"({concurrent / wall:.0f} tasks/s)",
                        flush=True,
                    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequential", type=int, default=300)
    parser.add_argument("--concurrent", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})  # the client on CPU1, the node on CPU0
    with tempfile.TemporaryDirectory(prefix="a2a-bindings-") as tmp:
        card = Path(tmp) / "card.yaml"
        card.write_text(CARD)
        port, grpc_port = free_port(), free_port()
        env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
        cmd = ["taskset", "-c", "0", sys.executable, "-m", "node.cli", "serve", str(card)]
        cmd += ["--port", str(port), "--grpc-port", str(grpc_port), "--data-dir", tmp]
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(url))
            print(f"blocking SendMessage (calculate), official client, node {url}, SQLite store")
            asyncio.run(measure(url, args.sequential, args.concurrent, args.rounds))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
