from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import httpx
import pytest

from node.errors import PeerError
from node.peers.directory import PeerDirectory
from node.peers.peer_guard import PeerGuard
from node.peers.settings import PeersSettings, RegistryConnection, StaticPeer
from node.peers.toolset import PeerToolset
from node.tooling.context import ToolContext
from tests.peers.peers_support import (
    REGISTRY_TOKEN,
    PeerFactory,
    Recorder,
    RequireToken,
    eventually,
    peer_app,
    peer_card,
    registry_app,
)
from tests.servers import free_socket, running, url_of

B_TOOLS = {"b__add", "b__fail", "b__ask", "b__slow", "b__hops", "b__shout"}


def directory(
    http: httpx.AsyncClient,
    tools: PeerToolset,
    *static: StaticPeer,
    registry: RegistryConnection | None = None,
    peer_guard: PeerGuard | None = None,
) -> PeerDirectory:
    settings = PeersSettings(static=list(static), registry=registry)
    return PeerDirectory(http, settings, self_id="a", toolset=tools, peer_guard=peer_guard)


async def register(http: httpx.AsyncClient, registry_url: str, peer_url: str) -> None:
    response = await http.post(
        f"{registry_url}/v1/agents",
        json={"card_url": f"{peer_url}/.well-known/agent-card.json"},
        headers={"Authorization": f"Bearer {REGISTRY_TOKEN}"},
    )
    assert response.status_code == 201, response.text


async def test_static_peers_become_tools_that_work(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    b = await start_peer()
    c = await start_peer(agent_id="c", name="Peer C")
    tools = PeerToolset()
    card_url = f"{c.url}/.well-known/agent-card.json"  # a full card URL works as well as a base
    peers = directory(http, tools, StaticPeer(url=b.url), StaticPeer(url=card_url))
    await peers.refresh()
    assert {t.name for t in tools} == B_TOOLS | {n.replace("b__", "c__") for n in B_TOOLS}
    assert [(p.id, p.name, p.healthy, p.source) for p in peers.peers()] == [
        ("b", "Peer B", True, "static"),
        ("c", "Peer C", True, "static"),
    ]
    call = tools.prepare_call("c__add", '{"a": "2", "b": 5}')
    assert await call.tool.execute(call.arguments, ToolContext()) == {"sum": 7}


async def test_filters_pick_skills_and_tags_and_expose_publishes(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    b = await start_peer()
    c = await start_peer(agent_id="c", name="Peer C")
    tools = PeerToolset()
    await directory(
        http,
        tools,
        StaticPeer(url=b.url, skills=["add", "fail"]),
        StaticPeer(url=c.url, tags=["text"], expose=True),
    ).refresh()
    assert {t.name: t.scope for t in tools} == {
        "b__add": "internal",
        "b__fail": "internal",
        "c__shout": "public",
    }


async def test_this_node_is_never_its_own_peer(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    me = await start_peer(agent_id="a", name="Me")
    tools = PeerToolset()
    peers = directory(http, tools, StaticPeer(url=me.url))
    await peers.refresh()
    assert len(tools) == 0
    assert peers.peers() == []


async def test_unreachable_static_peer_keeps_its_last_card(
    http: httpx.AsyncClient, start_peer: PeerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    sock, absent = free_socket(), free_socket()
    never = url_of(absent)
    tools = PeerToolset()
    async with contextlib.AsyncExitStack() as stack:
        card = peer_card(url_of(sock))
        url = await stack.enter_async_context(running(peer_app(card, Recorder()), sock))
        peers = directory(http, tools, StaticPeer(url=url), StaticPeer(url=never))
        await peers.refresh()
    assert {t.name for t in tools} == B_TOOLS
    with caplog.at_level(logging.WARNING, logger="node.peers.directory"):
        await peers.refresh()  # b is down now
    assert {t.name for t in tools} == B_TOOLS
    assert [(p.id, p.healthy) for p in peers.peers()] == [("b", False)]
    assert "keeping its last card" in caplog.text
    absent.close()


async def test_registry_peers_come_and_go(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path
) -> None:
    b = await start_peer()
    c = await start_peer(agent_id="c", name="Peer C")
    tools = PeerToolset()
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url:
        await register(http, registry_url, b.url)
        await register(http, registry_url, c.url)
        peers = directory(http, tools, registry=RegistryConnection(url=registry_url))
        await peers.refresh()
        assert {p.id: p.source for p in peers.peers()} == {"b": "registry", "c": "registry"}
        assert "c__add" in tools
        auth = {"Authorization": f"Bearer {REGISTRY_TOKEN}"}
        assert (await http.delete(f"{registry_url}/v1/agents/c", headers=auth)).status_code == 204
        await peers.refresh()
        assert {t.name for t in tools} == B_TOOLS


async def test_registry_down_keeps_the_last_good_view(
    http: httpx.AsyncClient,
    start_peer: PeerFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = await start_peer()
    tools = PeerToolset()
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url:
        await register(http, registry_url, b.url)
        peers = directory(http, tools, registry=RegistryConnection(url=registry_url))
        await peers.refresh()
    with caplog.at_level(logging.WARNING, logger="node.peers.directory"):
        await peers.refresh()
    assert {t.name for t in tools} == B_TOOLS
    assert [(p.id, p.healthy) for p in peers.peers()] == [("b", False)]
    assert "keeping the last view" in caplog.text


async def test_static_entry_wins_over_the_registry_entry(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path
) -> None:
    b = await start_peer()
    tools = PeerToolset()
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url:
        await register(http, registry_url, b.url)
        static = StaticPeer(url=b.url, skills=["add"])
        peers = directory(http, tools, static, registry=RegistryConnection(url=registry_url))
        await peers.refresh()
    assert {t.name for t in tools} == {"b__add"}
    assert [p.source for p in peers.peers()] == ["static"]


async def test_background_refresh_finds_new_peers_and_close_removes_tools(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path
) -> None:
    b = await start_peer()
    tools = PeerToolset()
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url:
        settings = PeersSettings(registry=RegistryConnection(url=registry_url, refresh_s=0.02))
        peers = PeerDirectory(http, settings, self_id="a", toolset=tools)
        peers.start()
        await eventually(lambda: peers.refreshes >= 1)
        assert len(tools) == 0
        await register(http, registry_url, b.url)
        await eventually(lambda: "b__add" in tools)
        await peers.aclose()
    assert len(tools) == 0


async def test_peer_token_comes_from_the_environment(
    http: httpx.AsyncClient, start_peer: PeerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = await start_peer(wrap=lambda app: RequireToken(app, "s3cret"))
    tools = PeerToolset()
    await directory(http, tools, StaticPeer(url=b.url, token_env="B_TOKEN")).refresh()
    call = tools.prepare_call("b__add", {"a": 1, "b": 2})
    with pytest.raises(PeerError, match="B_TOKEN"):
        await call.tool.execute(call.arguments, ToolContext())
    monkeypatch.setenv("B_TOKEN", "s3cret")
    assert await call.tool.execute(call.arguments, ToolContext()) == {"sum": 3}


async def test_registry_peers_must_live_at_allowed_addresses(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path
) -> None:
    from tests.peers.peers_support import Recorder as _Recorder

    good = await start_peer()  # on 127.0.0.1, like the registry: allowed without configuration
    sock = free_socket()
    # A card served on loopback whose interfaces point into a private network: never contacted.
    card = peer_card("http://10.0.0.1:8000", agent_id="inner", name="Inner")
    async with (
        running(peer_app(card, _Recorder()), sock) as inner_url,
        running(registry_app(str(tmp_path / "r.db")), free_socket()) as registry_url,
    ):
        await register(http, registry_url, good.url)
        await register(http, registry_url, inner_url)
        link = RegistryConnection(url=registry_url)
        guarded = directory(http, PeerToolset(), registry=link, peer_guard=PeerGuard())
        await guarded.refresh()
        assert {p.id for p in guarded.peers()} == {"b"}
        allowed = directory(
            http, PeerToolset(), registry=link, peer_guard=PeerGuard(["10.0.0.0/8"])
        )
        await allowed.refresh()
        assert {p.id for p in allowed.peers()} == {"b", "inner"}
        from_card = PeerDirectory(
            http, PeersSettings(registry=link), self_id="a", toolset=PeerToolset()
        )
        await from_card.refresh()
        assert {p.id for p in from_card.peers()} == {"b"}
