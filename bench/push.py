"""Push notifications: does a webhook slow the task? Blocking SendMessage latency per case.

Run:

    .venv/bin/python bench/push.py [--sender node|sdk] [--tasks 20] [--timeout 2]

One process: a node (``build_node_app``, built-in ``calculate``, store ``memory``, loopback
allowed for push through ``network.allow_cidrs``) and a webhook receiver, both on uvicorn on
127.0.0.1 ephemeral ports, and an httpx client sending ``--tasks`` blocking ``SendMessage`` calls
one after another, each with ``configuration.taskPushNotificationConfig`` naming the receiver:

- ``none``: no push config in the request (the node's lean path is off, ``A2A_NODE_LEAN_PATH=0``,
  so every case runs through the SDK's task machinery);
- ``fast``: the receiver answers 204 at once;
- ``slow``: the receiver answers after 0.5 s;
- ``hang``: the receiver never answers (each delivery ends at the ``--timeout`` seconds).

``--sender sdk`` is the *before* figure: the same node with the SDK's own sender,
``BasePushNotificationSender`` on an ``httpx.AsyncClient(timeout=--timeout)``, which the SDK
awaits inline once per task event. ``--sender node`` (default) is the node's
background dispatcher (:mod:`node.server.push_dispatcher`) with ``push.timeout_s=--timeout``.
Printed: p50 / max latency in ms per case and the number of webhook requests received.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node.card import parse_card  # noqa: E402
from node.server.app import build_node_app  # noqa: E402
from tests.servers import free_socket, running  # noqa: E402

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def receiver(counts: dict[str, int], release: asyncio.Event) -> Starlette:
    async def hook(request: Request) -> Response:
        mode = request.path_params["mode"]
        await request.body()
        counts[mode] = counts.get(mode, 0) + 1
        if mode == "slow":
            await asyncio.sleep(0.5)
        elif mode == "hang":
            await release.wait()  # until the bench ends
        return Response(status_code=204)

    return Starlette(routes=[Route("/hook/{mode}", hook, methods=["POST"])])


def node_card(timeout: float) -> Any:
    return parse_card(
        {
            "id": "bench-push",
            "name": "bench push",
            "description": "push bench",
            "tools": ["calculate"],
            "server": {"store": "memory"},
            "network": {"allow_cidrs": ["127.0.0.0/8"]},
            "push": {"timeout_s": timeout, "max_attempts": 1},
        },
        env={},
    )


def use_sdk_sender(app: Starlette, timeout: float) -> httpx.AsyncClient:
    """The *before* wiring: the SDK's BasePushNotificationSender, awaited inline per event."""
    from a2a.server.tasks import BasePushNotificationSender

    route = next(r for r in app.routes if getattr(r, "path", None) == "/")
    handler = route.endpoint.__self__.request_handler  # type: ignore[attr-defined]
    client = httpx.AsyncClient(timeout=timeout)
    sender = BasePushNotificationSender(client, handler._push_config_store)
    handler._active_task_registry._push_sender = sender
    return client


def body(hook: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "1+1"}}}],
        }
    }
    if hook:
        params["configuration"] = {
            "taskPushNotificationConfig": {"url": hook, "token": "bench-token"}
        }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sender", choices=["node", "sdk"], default="node")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--cases", default="none,fast,slow,hang")
    args = parser.parse_args()

    os.environ.setdefault("A2A_NODE_LEAN_PATH", "0")  # every case on the SDK's task path
    counts: dict[str, int] = {}
    release = asyncio.Event()
    app = build_node_app(node_card(args.timeout), data_dir=Path("/tmp/bench-push"))
    sdk_client = use_sdk_sender(app, args.timeout) if args.sender == "sdk" else None
    async with (
        running(receiver(counts, release), free_socket()) as hooks,
        running(app, free_socket()) as node,
        httpx.AsyncClient(base_url=node, headers=HEADERS, timeout=120) as client,
    ):
        print(f"sender={args.sender} tasks={args.tasks} webhook timeout={args.timeout:g}s")
        print(f"{'case':6} {'p50 ms':>9} {'max ms':>9} {'received':>9}")
        for case in args.cases.split(","):
            hook = None if case == "none" else f"{hooks}/hook/{case}"
            latencies = []
            for _ in range(args.tasks):
                start = time.perf_counter()
                reply = (await client.post("/", json=body(hook))).json()
                latencies.append((time.perf_counter() - start) * 1000)
                state = reply.get("result", {}).get("task", {}).get("status", {}).get("state")
                if state != "TASK_STATE_COMPLETED":
                    raise SystemExit(f"unexpected reply: {reply}")
            print(
                f"{case:6} {statistics.median(latencies):9.1f} {max(latencies):9.1f}"
                f" {counts.get(case, 0):9d}"
            )
        push = app.state.node.push
        if args.sender == "node" and push is not None:
            deadline = time.monotonic() + 4 * args.timeout + 10
            while push.dispatcher.pending and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            print(f"afterwards: received {counts}; dispatcher {push.dispatcher.stats}")
        release.set()
    if sdk_client is not None:
        await sdk_client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
