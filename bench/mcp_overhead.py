"""MCP overhead: an MCP tool called directly vs through a node; ``/mcp`` vs A2A SendMessage.

Run: ``.venv/bin/python bench/mcp_overhead.py [--calls 300]``

One node runs as a subprocess (``a2a-node serve``, store ``memory``) from ``cards/units.yaml``
plus the local ``calculate`` tool: its ``mcp_units_convert_length`` skill is a tool of the MCP
server ``tools/mcp_servers/units.py`` (stdio, spawned by the node), and it serves ``/mcp``.
From this process, sequentially, after 20 warm-up calls each, ``--calls`` calls of:

1. ``convert_length`` on the same MCP server spawned here (``mcp.Client``, stdio): the floor;
   1b. the same server through the node's tool layer in this process (``McpToolset`` + its
   supervisor + ``ToolRunner``: validation, link, result rendering), no HTTP;
2. ``mcp_units_convert_length`` through the node by A2A ``SendMessage`` (blocking, JSON-RPC):
   A2A + task + MCP;
3. ``calculate`` through the node by A2A ``SendMessage``: the node without MCP;
4. ``calculate`` through the node's ``/mcp`` (``mcp.Client``, streamable HTTP);
5. ``mcp_units_convert_length`` through the node's ``/mcp``: MCP in, A2A task, MCP out.

Prints p50 and p99 in milliseconds of each. A blocking SendMessage of a cheap inline tool
(``calculate``) takes the node's lean path; an MCP tool (it waits on I/O) and every ``/mcp`` call
(a stream, for progress) take the SDK's task machinery; ``--no-lean`` turns the lean path off so
row 3 runs on the same machinery as rows 2, 4 and 5.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node.card import McpServer  # noqa: E402
from node.client import NodeClient  # noqa: E402
from node.mcp import McpToolset  # noqa: E402
from node.tooling import ToolCall, ToolContext, ToolRunner  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def timed(name: str, call: Callable[[], Awaitable[Any]], n: int) -> None:
    for _ in range(20):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"{name:58s} p50 {statistics.median(samples):6.2f} ms   p99 {p99:6.2f} ms")


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                body = (await http.get(f"{url}/readyz")).json()
                if body["mcp_servers"]["units"]["state"] == "connected":
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            await asyncio.sleep(0.1)
    raise SystemExit("the node did not become ready")


async def main(calls: int, lean: bool) -> None:
    card = yaml.safe_load((ROOT / "cards" / "units.yaml").read_text())
    card["tools"] = ["calculate"]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    length = {"value": 5, "unit": "km", "to": "mi"}
    with tempfile.TemporaryDirectory() as tmp:
        card_path = Path(tmp) / "units.yaml"
        card_path.write_text(yaml.safe_dump(card))
        node = subprocess.Popen(
            [sys.executable, "-m", "node.cli", "serve", str(card_path), "--port", str(port),
             "--store", "memory", "--data-dir", tmp],
            cwd=ROOT, env={**os.environ, "PYTHON": sys.executable,
                           "A2A_NODE_LEAN_PATH": "1" if lean else "0"},
        )  # fmt: skip
        try:
            await wait_ready(url)
            server = StdioServerParameters(
                command=sys.executable, args=["tools/mcp_servers/units.py"], cwd=str(ROOT)
            )
            async with Client(server, read_timeout_seconds=30) as direct:
                await timed(
                    "1. MCP server directly (stdio)",
                    lambda: direct.call_tool("convert_length", length),
                    calls,
                )
            entry = McpServer(
                name="units", command=sys.executable, args=["tools/mcp_servers/units.py"]
            )
            toolset = McpToolset([entry])
            toolset.start()
            await toolset.wait_settled(30)
            runner, ctx = ToolRunner(toolset), ToolContext()
            try:
                await timed(
                    "1b. the same through the node's tool layer (McpToolset)",
                    lambda: runner.run([ToolCall("mcp_units_convert_length", length)], ctx),
                    calls,
                )
            finally:
                await toolset.aclose()
            async with NodeClient.connect(url, streaming=False) as a2a:
                await timed(
                    "2. MCP tool through the node (A2A SendMessage)",
                    lambda: a2a.call("mcp_units_convert_length", length),
                    calls,
                )
                await timed(
                    "3. local skill through the node (A2A SendMessage)",
                    lambda: a2a.call("calculate", {"expression": "6*7"}),
                    calls,
                )
            async with Client(f"{url}/mcp", read_timeout_seconds=30) as mcp:
                await timed(
                    "4. local skill through the node's /mcp",
                    lambda: mcp.call_tool("calculate", {"expression": "6*7"}),
                    calls,
                )
                await timed(
                    "5. MCP tool through the node's /mcp",
                    lambda: mcp.call_tool("mcp_units_convert_length", length),
                    calls,
                )
        finally:
            node.terminate()
            node.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument(
        "--no-lean",
        action="store_true",
        help="turn the node's lean path off (A2A_NODE_LEAN_PATH=0)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.calls, not args.no_lean))
