"""Hardening: a node keeps answering under hostile tool calls; HTML to text in linear time.

Run: ``.venv/bin/python bench/hardening.py [--rounds 5]``

Part 1, ``/healthz`` under hostile calls. A real node runs as a uvicorn subprocess on 127.0.0.1
(``python bench/hardening.py --serve --port P --data DIR``; store ``memory``; tools ``grep``
with a 10 s timeout and ``hog``, a pure-Python endless loop with ``isolation="process"`` and a
2 s timeout). Its workspace holds two files of 100,000 lines of 28 letters and a ``!`` (2.9 MB
each): on each line Python's ``re`` would backtrack 2^27 times on ``^(\\w+\\s?)*$``. The driver
probes ``GET /healthz`` back to back (one connection, httpx) while idle (50 probes discarded,
then 1,000), then while each of ``--rounds`` blocking ``SendMessage`` calls of the catastrophic
grep runs, then while each of ``--rounds`` hog calls runs (the pool is warmed first by one
call), and prints p50/p99/max of the probe latency and each call's duration and outcome.

Part 2, HTML to text, in this process: a 2 MB page of nested blocks, lists, links and inline
markup; ``html_to_text`` timed directly and through the worker pool (``run_in_process``,
arguments and result pickled through pipes); then 6 such conversions at once through the pool
while a trivial ``asyncio.to_thread`` call is timed back to back: the thread pool stays free.
For comparison, the same 6 conversions in threads (``asyncio.to_thread(html_to_text)``, what a
sync tool's default ``thread`` isolation would do).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from node.tooling import tool  # noqa: E402

CATASTROPHIC = r"^(\w+\s?)*$"
LINE = "a" * 28 + "!\n"
LINES_PER_FILE = 100_000
GREP_TIMEOUT_S = 10.0
HOG_TIMEOUT_S = 2.0
PAGE_BYTES = 2_000_000
CONVERSIONS = 6


def spin() -> None:
    while True:
        pass


@tool(isolation="process", timeout=HOG_TIMEOUT_S, read_only=True)
def hog() -> None:
    """Loop forever in pure Python."""
    spin()


# -- the server ---------------------------------------------------------------------------------


def serve(port: int, data_dir: Path) -> None:
    from node import build_node_app, parse_card
    from node.server.serve import make_server

    card = parse_card(
        {
            "id": "hardened",
            "name": "Hardened",
            "description": "A node under hostile calls.",
            "tools": [{"name": "grep", "timeout": GREP_TIMEOUT_S}],
        },
        env={},
    )
    app = build_node_app(
        card, public_url=f"http://127.0.0.1:{port}", data_dir=data_dir, store="memory", tools=[hog]
    )
    make_server(app, "127.0.0.1", port).run()


# -- the driver ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    p50 = statistics.median(ms)
    return f"n={len(ms):5d}  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms  max {ms[-1]:7.2f} ms"


def send_body(skill: str, arguments: dict[str, Any]) -> dict[str, Any]:
    data = {"skill": skill, "arguments": arguments}
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"data": data}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def probe_while(http: httpx.AsyncClient, url: str, call: asyncio.Task[Any]) -> list[float]:
    latencies: list[float] = []
    while not call.done():
        start = time.perf_counter()
        response = await http.get(f"{url}/healthz")
        latencies.append(time.perf_counter() - start)
        response.raise_for_status()
    return latencies


async def hostile_calls(url: str, rounds: int) -> None:
    headers = {"A2A-Version": "1.0"}
    async with httpx.AsyncClient(timeout=60.0) as http, httpx.AsyncClient(timeout=60.0) as probe:
        for _ in range(50):  # warm-up: connection, first requests
            (await probe.get(f"{url}/healthz")).raise_for_status()
        idle: list[float] = []
        for _ in range(1000):
            start = time.perf_counter()
            (await probe.get(f"{url}/healthz")).raise_for_status()
            idle.append(time.perf_counter() - start)
        print(f"  idle                           {summary(idle)}")
        kinds = [
            ("grep", {"pattern": CATASTROPHIC, "glob": "*.txt"}, "catastrophic grep"),
            ("hog", {}, "process-isolated hog"),
        ]
        warm = await http.post(url, json=send_body("hog", {}), headers=headers)
        warm.raise_for_status()  # starts the worker pool (forkserver and workers)
        for skill, arguments, label in kinds:
            latencies: list[float] = []
            outcomes = []
            for _ in range(rounds):
                start = time.perf_counter()
                post = http.post(url, json=send_body(skill, arguments), headers=headers)
                call = asyncio.create_task(post)
                latencies += await probe_while(probe, url, call)
                response = await call
                elapsed = time.perf_counter() - start
                task = response.json()["result"]["task"]
                state = task["status"]["state"].removeprefix("TASK_STATE_").lower()
                outcomes.append(f"{state} {elapsed:.2f} s")
            print(f"  during {label:23s} {summary(latencies)}")
            print(f"    calls: {', '.join(outcomes)}")


def part_one(rounds: int) -> None:
    print("== /healthz while hostile tool calls run (node: uvicorn subprocess on 127.0.0.1)")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        workspace = data / "workspace"
        workspace.mkdir()
        for name in ("one.txt", "two.txt"):
            (workspace / name).write_text(LINE * LINES_PER_FILE)
        port = free_port()
        cmd = [sys.executable, __file__, "--serve", "--port", str(port), "--data", str(data)]
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1.0).is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the node did not start")
                time.sleep(0.05)
            asyncio.run(hostile_calls(url, rounds))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)


def page(size: int) -> str:
    block = (
        '<div class="c"><h2>Title {n}</h2><p>Some <b>bold</b>, <i>italic</i> and '
        '<a href="/p/{n}">a link {n}</a> in a sentence.</p><ul><li>one</li><li>two <em>2</em>'
        "</li></ul><table><tr><td>1</td><td>2</td></tr></table></div>\n"
    )
    parts, total, n = (
        ["<html><head><title>Big</title><script>var x = 1;</script></head><body>"],
        0,
        0,
    )
    while total < size:
        parts.append(block.format(n=n))
        total += len(parts[-1])
        n += 1
    return "".join([*parts, "</body></html>"])


async def thread_pool_latency(conversions: list[asyncio.Future[Any]]) -> list[float]:
    latencies: list[float] = []
    while not all(c.done() for c in conversions):
        start = time.perf_counter()
        await asyncio.to_thread(int)
        latencies.append(time.perf_counter() - start)
    await asyncio.gather(*conversions)
    return latencies


async def part_two_async(html: str) -> None:
    from node.tooling import run_in_process
    from node.tooling.isolation import close_default_pool, default_pool
    from tools.web import html_to_text

    await default_pool().start()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        await run_in_process(html_to_text, html)
        rounds.append(time.perf_counter() - start)
    print(f"  html_to_text via the worker pool   median {statistics.median(rounds) * 1000:7.1f} ms")
    idle = []
    for _ in range(200):
        start = time.perf_counter()
        await asyncio.to_thread(int)
        idle.append(time.perf_counter() - start)
    print(f"  to_thread(int), idle               {summary(idle)}")
    size = default_pool().size
    start = time.perf_counter()
    pooled = [asyncio.ensure_future(run_in_process(html_to_text, html)) for _ in range(CONVERSIONS)]
    latencies = await thread_pool_latency(pooled)
    took = time.perf_counter() - start
    print(
        f"  to_thread(int), {CONVERSIONS} conversions in {size} workers {summary(latencies)}"
        f"  (all done in {took:.2f} s)"
    )
    start = time.perf_counter()
    threaded = [asyncio.ensure_future(asyncio.to_thread(html_to_text, html)) for _ in range(6)]
    latencies = await thread_pool_latency(threaded)
    took = time.perf_counter() - start
    print(
        f"  to_thread(int), {CONVERSIONS} conversions in threads {summary(latencies)}"
        f"  (all done in {took:.2f} s; for comparison)"
    )
    close_default_pool()


def part_two() -> None:
    from tools.web import html_to_text

    print(f"== HTML to text ({PAGE_BYTES / 1e6:.0f} MB page, in this process)")
    html = page(PAGE_BYTES)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        text = html_to_text(html)
        rounds.append(time.perf_counter() - start)
    print(
        f"  html_to_text, {len(html):,} chars -> {len(text):,} chars   "
        f"median {statistics.median(rounds) * 1000:7.1f} ms  max {max(rounds) * 1000:7.1f} ms"
    )
    asyncio.run(part_two_async(html))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.data)
        return
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}")
    part_one(args.rounds)
    part_two()


if __name__ == "__main__":
    main()
