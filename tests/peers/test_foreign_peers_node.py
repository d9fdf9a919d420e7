"""End to end: an A2A client → a node → a peer that is not a2a-node.

The node lists the peer statically (``expose: true``, so the peer's skill is one of the node's
own skills) or finds it in a registry; the client calls the node, the node's executor runs the
peer tool over the binding the peer's card prefers. Peers: a plain a2a-sdk 1.3 JSON-RPC server
answering with a Message, a gRPC-only server answering with a Task, an 0.3-only server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import TaskState
from google.protobuf import json_format

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.peers.directory import PeerDirectory
from node.peers.grpc_channels import GrpcChannels
from node.peers.settings import PeersSettings, RegistryConnection
from node.peers.toolset import PeerToolset
from node.server.app import build_node_app
from node.tooling.context import ToolContext
from tests.peers.foreign_peers import Answer, StartPlain
from tests.peers.peers_support import REGISTRY_TOKEN, eventually, registry_app
from tests.peers.test_directory_listing import StandIn, entry
from tests.servers import InProcessApps, free_socket, running

PEERS = [
    pytest.param("message", ("JSONRPC", "HTTP+JSON"), False, "hello, hi", id="plain-message"),
    pytest.param("task", ("GRPC",), False, "report: hi", id="grpc-only-task"),
    pytest.param("task", ("JSONRPC",), True, "report: hi", id="v0_3-only-task"),
]


async def hub(apps: InProcessApps, tmp_path: Path, peer_url: str) -> str:
    card = parse_card(
        {
            "id": "hub",
            "name": "Hub",
            "description": "Publishes a foreign peer's skill as its own.",
            "peers": {"static": [{"url": peer_url, "expose": True}], "refresh_s": 60},
        },
        env={},
    )
    return await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "hub", store="memory")
    )


@pytest.mark.parametrize(("answer", "bindings", "v03", "result"), PEERS)
async def test_a_client_completes_a_task_on_a_node_that_calls_a_foreign_peer(
    apps: InProcessApps,
    tmp_path: Path,
    start_plain: StartPlain,
    answer: Answer,
    bindings: tuple[str, ...],
    v03: bool,
    result: str,
) -> None:
    peer = await start_plain(answer, bindings=bindings, v03=v03, pure_v03_card=v03)
    url = await hub(apps, tmp_path, peer.url)
    async with apps.client() as http:

        async def published() -> bool:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            return "plain__echo" in {s["id"] for s in card["skills"]}

        await eventually(published)
        async with NodeClient.connect(url, streaming=False, http=http) as client:
            task = await client.call("plain__echo", {"text": "hi"})
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
            assert artifacts_of(task) == {"plain__echo": [result]}
            failed = await client.call("plain__echo", {"text": "fail please"})
    assert peer.seen.parts[0] == [{"text": "hi"}]
    if answer == "task":
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        assert "cannot do: fail please" in status_text(failed)


async def test_registry_peers_on_grpc_and_0_3_are_found_and_called(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    tmp_path: Path,
) -> None:
    grpc_only = await start_plain("task", bindings=("GRPC",), name="Grpc Only")
    legacy = await start_plain("message", bindings=("JSONRPC",), v03=True, name="Legacy")
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url:
        for peer in (grpc_only, legacy):
            response = await http.post(
                f"{registry_url}/v1/agents",
                json={"card_url": f"{peer.url}/.well-known/agent-card.json"},
                headers={"Authorization": f"Bearer {REGISTRY_TOKEN}"},
            )
            assert response.status_code == 201, response.text
        tools = PeerToolset()
        settings = PeersSettings(registry=RegistryConnection(url=registry_url))
        directory = PeerDirectory(http, settings, self_id="a", toolset=tools)
        try:
            await directory.refresh()
            assert [p.id for p in directory.peers()] == ["grpc-only", "legacy"]
            by_name = {t.name: t for t in tools}
            ctx = ToolContext()
            assert await by_name["grpc-only__echo"].execute({"text": "hi"}, ctx) == "report: hi"
            assert await by_name["legacy__echo"].execute({"text": "hi"}, ctx) == "hello, hi"
        finally:
            await directory.aclose()
    assert len(grpc_only.seen.grpc_metadata) == 1
    assert legacy.seen.http == [("/", "0.3")]


async def test_a_listing_with_a_0_3_only_card_yields_a_text_tool(
    http: httpx.AsyncClient,
    start_plain: StartPlain,
) -> None:
    legacy = await start_plain("task", bindings=("JSONRPC",), v03=True, pure_v03_card=True)
    document: dict[str, Any] = (await http.get(f"{legacy.url}/.well-known/agent-card.json")).json()
    assert "supportedInterfaces" not in document
    stand_in = StandIn()
    stand_in.body = json.dumps({"agents": [entry(document, "plain")]}).encode()
    async with running(stand_in.app(), free_socket(), lifespan="off") as registry_url:
        tools = PeerToolset()
        settings = PeersSettings(registry=RegistryConnection(url=registry_url))
        directory = PeerDirectory(http, settings, self_id="a", toolset=tools)
        try:
            await directory.refresh()
            (tool,) = tools
            assert tool.parameters["required"] == ["text"]
            assert await tool.execute({"text": "hi"}, ToolContext()) == "report: hi"
        finally:
            await directory.aclose()
    assert legacy.seen.http == [("/", "0.3")]


async def test_registry_peers_with_grpc_addresses_off_limits_are_left_out(
    http: httpx.AsyncClient, start_plain: StartPlain
) -> None:
    peer = await start_plain("task", bindings=("GRPC",))
    document = json_format.MessageToDict(peer.card)
    entries = [entry(document, "ok")]
    for n, address in enumerate(["10.1.2.3:50051", "grpc://169.254.169.254:80", "no-port"]):
        bad = {**document, "name": f"Bad {n}"}
        bad["supportedInterfaces"] = [{**document["supportedInterfaces"][0], "url": address}]
        entries.append(entry(bad, f"bad{n}"))
    stand_in = StandIn()
    stand_in.body = json.dumps({"agents": entries}).encode()
    async with running(stand_in.app(), free_socket(), lifespan="off") as registry_url:
        tools = PeerToolset()
        settings = PeersSettings(registry=RegistryConnection(url=registry_url))
        directory = PeerDirectory(http, settings, self_id="a", toolset=tools)
        try:
            await directory.refresh()
            assert [p.id for p in directory.peers()] == ["plain"]
            assert directory.skipped_entries == 3
        finally:
            await directory.aclose()
