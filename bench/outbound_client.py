"""CPU per request of the node's outbound HTTP client against plain httpx and bare aiohttp.

Run: ``.venv/bin/python bench/outbound_client.py [--calls 2000]``.

One process, one uvloop: a Starlette app under uvicorn on 127.0.0.1 answers every POST with a
~200-byte JSON-RPC result (the shape of a peer's SendMessage answer); each client posts a
~300-byte JSON-RPC SendMessage body sequentially and parses the JSON answer. Printed: wall time
and process CPU per request (client + server, the server's share the same for every client), so
the differences between rows are the clients' own. Clients: ``httpx.AsyncClient`` (httpcore),
``node.outbound_http.outbound_client`` (httpx's API over aiohttp, what the official a2a-sdk
client uses inside a node) and a bare ``aiohttp.ClientSession`` (the floor).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import uvicorn
import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.outbound_http import outbound_client

ANSWER = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": "1",
        "result": {
            "task": {
                "id": "0" * 36,
                "contextId": "1" * 36,
                "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-02T04:00:00Z"},
                "artifacts": [{"artifactId": "a", "parts": [{"data": {"result": 85.0}}]}],
            }
        },
    }
).encode()
BODY = {
    "jsonrpc": "2.0",
    "id": "1",
    "method": "SendMessage",
    "params": {
        "message": {
            "messageId": "m" * 32,
            "role": "ROLE_USER",
            "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "12 * 7 + 1"}}}],
            "metadata": {"a2a-hop": {"chain": ["coordinator"], "max_hops": 4, "deadline": 1e10}},
        },
        "configuration": {"historyLength": 0},
    },
}


async def answer(request: Request) -> Response:
    await request.body()
    return Response(ANSWER, media_type="application/json")


async def measure(name: str, post: Callable[[], Awaitable[object]], calls: int) -> None:
    for _ in range(min(200, calls)):
        await post()
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await post()
    wall = (time.perf_counter() - started) / calls * 1e6
    used = (time.process_time() - cpu) / calls * 1e6
    print(f"  {name:<34}{wall:>10.0f}{used:>12.0f}")


async def main(calls: int) -> None:
    port = 18000 + os.getpid() % 1000
    app = Starlette(routes=[Route("/", answer, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    url = f"http://127.0.0.1:{port}/"
    print(f"{calls} sequential POSTs per client, load {os.getloadavg()[0]:.2f}")
    print(f"  {'client':<34}{'wall µs':>10}{'CPU µs/req':>12}  (client + server)")
    async with httpx.AsyncClient(timeout=30) as plain:
        await measure("httpx (httpcore)", lambda: _httpx(plain, url), calls)
    async with outbound_client(timeout=30) as node:
        await measure("node outbound (httpx over aiohttp)", lambda: _httpx(node, url), calls)
    async with aiohttp.ClientSession() as bare:
        await measure("bare aiohttp (floor)", lambda: _aiohttp(bare, url), calls)
    server.should_exit = True
    await serving


async def _httpx(client: httpx.AsyncClient, url: str) -> object:
    return (await client.post(url, json=BODY)).json()


async def _aiohttp(session: aiohttp.ClientSession, url: str) -> object:
    async with session.post(url, json=BODY) as response:
        return await response.json()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    uvloop.run(main(parser.parse_args().calls))
