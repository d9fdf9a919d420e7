"""1,000 concurrent blocking SendMessage calls through the official client: wall time, none lost.

Run: ``.venv/bin/python bench/concurrent_tasks.py [--tasks 1000] [--rounds 3] [--store sqlite]
[--clients aiohttp,httpx] [--lean on,off]``

A node process (``build_node_app``, card with ``calculate``, the given store; lean path on and/or
off: ``A2A_NODE_LEAN_PATH``) is pinned to CPU0 with ``taskset``; this process (CPU1) opens one
official client (``ClientFactory`` over one ``httpx.AsyncClient`` allowing ``--tasks``
connections) and sends ``--tasks`` messages at once (``asyncio.gather``), each computing a
different expression. The client's HTTP client is the node's own outbound one
(``aiohttp``: :func:`node.outbound_http.outbound_client`, httpx over aiohttp's pool) or plain
``httpx`` (httpcore's pool), both in one run by default. CPU per task is the client's and the
node's CPU time during the burst divided by the tasks (less noisy than wall time on a busy
machine). Checked: every answer is COMPLETED with its own result, every task id is
distinct, and after the burst ``ListTasks`` on the node lists every answered task COMPLETED
(a page read is retried on a dropped connection; the burst's calls never are)
(lost: answered but not kept; calls that failed are counted apart). Wall time: first send to
last answer. Target (issue 13): ≤ 5 s, 0 lost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from a2a.client import (  # noqa: E402
    A2ACardResolver,
    A2AClientError,
    Client,
    ClientConfig,
    ClientFactory,
)
from a2a.types import (  # noqa: E402
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    TaskState,
)

from node.client import artifacts_of, skill_message  # noqa: E402
from node.outbound_http import LIMITS, outbound_client  # noqa: E402

CLIENTS: dict[str, Callable[..., httpx.AsyncClient]] = {
    "aiohttp": outbound_client,
    "httpx": httpx.AsyncClient,
}

TARGET_S = 5.0
CARD = """
id: burst
name: Burst Node
description: A node taking a burst of concurrent tasks.
tools: [calculate]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_ready(url: str, deadline_s: float = 30.0) -> None:
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


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Result(NamedTuple):
    wall: float  # s, first send to last answer
    right: int  # right answers
    failed: int  # calls that raised
    lost: int  # answered tasks the node does not list
    client_cpu: float  # s during the burst
    node_cpu: float  # s during the burst


async def list_page(client: Client, token: str) -> ListTasksResponse:
    """One page of the check's listing; a read, so retried (twice) on a dropped connection."""
    for attempt in range(3):
        try:
            return await client.list_tasks(ListTasksRequest(page_size=100, page_token=token))
        except A2AClientError as exc:
            if attempt == 2 or not isinstance(exc.__cause__, httpx.TransportError):
                raise
            print(f"    listing retried after: {exc}", flush=True)
    raise AssertionError("unreachable")


async def burst(url: str, tasks: int, client_kind: str, node_pid: int) -> Result:
    limits = httpx.Limits(
        max_connections=tasks,
        max_keepalive_connections=tasks,
        keepalive_expiry=LIMITS.keepalive_expiry,
    )
    async with CLIENTS[client_kind](limits=limits, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)

        async def one(i: int) -> tuple[str, bool]:
            request = SendMessageRequest(
                message=skill_message("calculate", {"expression": f"{i} * 3"})
            )
            events = [event async for event in client.send_message(request)]
            task = events[-1].task
            right = task.status.state == TaskState.TASK_STATE_COMPLETED and artifacts_of(task) == {
                "calculate": [i * 3]
            }
            return task.id, right

        start, cpu0, node0 = time.perf_counter(), time.process_time(), cpu_s(node_pid)
        answers = await asyncio.gather(*(one(i) for i in range(tasks)), return_exceptions=True)
        wall = time.perf_counter() - start
        client_cpu, node_cpu = time.process_time() - cpu0, cpu_s(node_pid) - node0
        failures = Counter(
            f"{type(a).__name__}: {a} ({type(a.__cause__).__name__}: {a.__cause__})"
            for a in answers
            if isinstance(a, BaseException)
        )
        for failure, count in failures.most_common(5):
            print(f"    {count} calls failed: {failure}", flush=True)
        results = [a for a in answers if not isinstance(a, BaseException)]
        right = sum(ok for _, ok in results) if len({t for t, _ in results}) == len(results) else 0
        listed: set[str] = set()
        token = ""
        while True:
            page = await list_page(client, token)
            listed |= {t.id for t in page.tasks if t.status.state == TaskState.TASK_STATE_COMPLETED}
            token = page.next_page_token
            if not token:
                break
        lost = len({task_id for task_id, _ in results} - listed)
        return Result(wall, right, tasks - len(results), lost, client_cpu, node_cpu)


def run(store: str, lean: bool, tasks: int, client_kind: str) -> Result:
    with tempfile.TemporaryDirectory(prefix="a2a-burst-") as tmp:
        card = Path(tmp) / "card.yaml"
        card.write_text(CARD)
        port = free_port()
        env = {
            **os.environ,
            "A2A_NODE_LEAN_PATH": "1" if lean else "0",
            "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false",
        }
        cmd = ["taskset", "-c", "0", sys.executable, "-m", "node.cli", "serve", str(card)]
        cmd += ["--port", str(port), "--data-dir", tmp, "--store", store]
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(url))
            return asyncio.run(burst(url, tasks, client_kind, proc.pid))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", default="sqlite")
    parser.add_argument("--clients", default="aiohttp,httpx", help="aiohttp and/or httpx")
    parser.add_argument("--lean", default="on,off", help="lean path on and/or off")
    args = parser.parse_args()
    clients = args.clients.split(",")
    if not set(clients) <= set(CLIENTS):
        parser.error(f"--clients: choose among {', '.join(CLIENTS)}")
    os.sched_setaffinity(0, {1})  # the client on CPU1, the node on CPU0
    print(f"{args.tasks} concurrent blocking SendMessage, official client, store {args.store}")
    ok = True
    for lean in (mode == "on" for mode in args.lean.split(",")):
        for client_kind in clients:
            for n in range(args.rounds):
                r = run(args.store, lean, args.tasks, client_kind)
                met = r.wall <= TARGET_S and r.lost == r.failed == 0 and r.right == args.tasks
                ok &= r.right == args.tasks and r.lost == 0
                print(
                    f"  lean path {'on ' if lean else 'off'}, client {client_kind:7} round "
                    f"{n + 1}: wall {r.wall:.2f} s, right answers {r.right}/{args.tasks}, failed "
                    f"calls {r.failed}, answered but not kept (lost) {r.lost} (target <= "
                    f"{TARGET_S:g} s, 0 lost: {'met' if met else 'MISSED'}); CPU per task: "
                    f"client {r.client_cpu / args.tasks * 1e3:.2f} ms, node "
                    f"{r.node_cpu / args.tasks * 1e3:.2f} ms; load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
