"""A node polls its registry with ETags: an unchanged listing is a 304, not parsed, no rebuild."""

from __future__ import annotations

from pathlib import Path

import httpx

from node.peers.directory import PeerDirectory
from node.peers.registry_client import RegistryReader
from node.peers.settings import PeersSettings, RegistryConnection
from node.peers.toolset import PeerToolset
from tests.peers.peers_support import REGISTRY_TOKEN, PeerFactory, registry_app
from tests.servers import free_socket, running


async def register(http: httpx.AsyncClient, registry_url: str, peer_url: str) -> None:
    response = await http.post(
        f"{registry_url}/v1/agents",
        json={"card_url": f"{peer_url}/.well-known/agent-card.json"},
        headers={"Authorization": f"Bearer {REGISTRY_TOKEN}"},
    )
    assert response.status_code == 201, response.text


async def test_a_reader_revalidates_every_page_and_reports_no_change(
    tmp_path: Path, start_peer: PeerFactory
) -> None:
    statuses: list[int] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    b, c = await start_peer(), await start_peer(agent_id="c", name="Peer C")
    async with (
        httpx.AsyncClient(timeout=5, event_hooks={"response": [record]}) as http,
        running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url,
    ):
        await register(http, registry_url, b.url)
        await register(http, registry_url, c.url)
        reader = RegistryReader(http, registry_url)
        statuses.clear()
        first = await reader.read(page_size=1)  # two pages
        assert first.changed and [a["id"] for a in first.agents] == ["b", "c"]
        second = await reader.read(page_size=1)
        assert not second.changed and second.agents == first.agents
        assert statuses == [200, 200, 304, 304]
        auth = {"Authorization": f"Bearer {REGISTRY_TOKEN}"}
        assert (await http.delete(f"{registry_url}/v1/agents/c", headers=auth)).is_success
        third = await reader.read(page_size=1)
        assert third.changed and [a["id"] for a in third.agents] == ["b"]


async def test_an_unchanged_registry_leaves_the_peer_tools_untouched(
    tmp_path: Path, start_peer: PeerFactory
) -> None:
    b, c = await start_peer(), await start_peer(agent_id="c", name="Peer C")
    async with (
        httpx.AsyncClient(timeout=5) as http,
        running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url,
    ):
        await register(http, registry_url, b.url)
        tools = PeerToolset()
        settings = PeersSettings(registry=RegistryConnection(url=registry_url))
        peers = PeerDirectory(http, settings, self_id="a", toolset=tools)
        await peers.refresh()
        revision, installed = tools.revision, list(tools)
        assert installed and peers.registry_unchanged == 0
        await peers.refresh()
        assert peers.registry_unchanged == 1
        assert tools.revision == revision and list(tools) == installed
        await register(http, registry_url, c.url)
        await peers.refresh()
        assert peers.registry_unchanged == 1 and tools.revision != revision
        assert {p.id for p in peers.peers()} == {"b", "c"}
        await peers.aclose()
