"""A node calls another node over gRPC when that node's card prefers it (or offers nothing else).

Node B serves JSON-RPC, REST and gRPC (``server.grpc_port``) and requires a bearer token. The
coordinator A lists B through a card document that keeps only B's gRPC interface (at 1.0, or at
0.3 only), so the one way to reach B is its gRPC binding: the structured skill call, B's skill
schemas and A's token (as gRPC metadata) all have to cross it. A client calls A, which calls B.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.server.app import build_node_app
from tests.peers.peers_support import calculating_node, eventually, one_interface
from tests.servers import InProcessApps, free_socket, running

TOKEN = "b-token-123"
Serve = Any


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_node_calls_a_node_over_grpc_with_its_token(
    serve: Serve,
    apps: InProcessApps,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    version: str,
) -> None:
    b = await calculating_node(serve, tmp_path / "b", TOKEN)
    async with httpx.AsyncClient(timeout=5.0) as http:
        document = (await http.get(f"{b}/.well-known/agent-card.json")).json()
    only_grpc = one_interface(document, "GRPC", version)

    async def card(_: Request) -> JSONResponse:
        return JSONResponse(only_grpc)

    monkeypatch.setenv("B_TOKEN", TOKEN)
    app = Starlette(routes=[Route("/b.json", card)])
    async with running(app, free_socket(), lifespan="off") as card_host:
        static = {"url": f"{card_host}/b.json", "token_env": "B_TOKEN", "expose": True}
        hub_card = parse_card(
            {
                "id": "hub",
                "name": "Hub",
                "description": "Publishes node B's skills.",
                "peers": {"static": [static], "refresh_s": 60},
            },
            env={},
        )
        hub = await apps.start(
            lambda u: build_node_app(
                hub_card, public_url=u, data_dir=tmp_path / "hub", store="memory"
            )
        )
        async with apps.client() as client_http:

            async def published() -> bool:
                served = (await client_http.get(f"{hub}/.well-known/agent-card.json")).json()
                return "data__calculate" in {s["id"] for s in served["skills"]}

            await eventually(published)
            async with NodeClient.connect(hub, streaming=False, http=client_http) as client:
                task = await client.call("data__calculate", {"expression": "2 * (3 + 4)"})
                bad = await client.call("data__calculate", {"expression": "1 +"})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    assert artifacts_of(task) == {"data__calculate": [14]}
    assert bad.status.state == TaskState.TASK_STATE_FAILED
    assert "peer data task failed: calculate: invalid expression '1 +'" in status_text(bad)
