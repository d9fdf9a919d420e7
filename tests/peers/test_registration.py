from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from node.card import parse_card
from node.peers.registration import RegistryLink
from node.server.app import build_node_app
from node.server.runtime import shared_store
from tests.peers.peers_support import REGISTRY_TOKEN, Peer, PeerFactory, eventually, registry_app
from tests.server.test_edge_guard import fresh_schema
from tests.servers import free_socket, running

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")

AUTH = {"Authorization": f"Bearer {REGISTRY_TOKEN}"}


@pytest.fixture
async def registry_url(tmp_path: Path) -> AsyncIterator[str]:
    async with running(registry_app(str(tmp_path / "r.db")), free_socket()) as url:
        yield url


def link(http: httpx.AsyncClient, registry: str, peer: Peer, **kw: Any) -> RegistryLink:
    card_url = f"{peer.url}/.well-known/agent-card.json"
    kw.setdefault("backoff_initial_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return RegistryLink(http, registry, REGISTRY_TOKEN, card_url, heartbeat_s=0.02, **kw)


async def test_registers_then_heartbeats(
    http: httpx.AsyncClient, start_peer: PeerFactory, registry_url: str
) -> None:
    b = await start_peer()
    registration = link(http, registry_url, b)
    registration.start()
    await eventually(lambda: registration.heartbeats >= 2)
    assert registration.agent_id == "b"
    entry = (await http.get(f"{registry_url}/v1/agents/b")).json()
    assert entry["healthy"] is True
    await registration.aclose()


async def test_registers_again_when_the_registry_forgot_it(
    http: httpx.AsyncClient, start_peer: PeerFactory, registry_url: str
) -> None:
    b = await start_peer()
    registration = link(http, registry_url, b)
    registration.start()
    await eventually(lambda: registration.registrations == 1)
    response = await http.delete(f"{registry_url}/v1/agents/b", headers=AUTH)
    assert response.status_code == 204
    await eventually(lambda: registration.registrations == 2)
    assert (await http.get(f"{registry_url}/v1/agents/b")).status_code == 200
    await registration.aclose()


async def test_deregisters_on_close(
    http: httpx.AsyncClient, start_peer: PeerFactory, registry_url: str
) -> None:
    b = await start_peer()
    registration = link(http, registry_url, b)
    registration.start()
    await eventually(lambda: registration.agent_id is not None)
    await registration.aclose()
    assert registration.agent_id is None
    assert (await http.get(f"{registry_url}/v1/agents/b")).status_code == 404


async def test_keeps_trying_while_the_registry_is_down(
    start_peer: PeerFactory, tmp_path: Path
) -> None:
    b = await start_peer()
    sock = free_socket()  # the registry's port: refuses connections until the registry starts
    attempts: list[httpx.Request] = []

    async def count(request: httpx.Request) -> None:
        attempts.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as http:
        registry = f"http://127.0.0.1:{sock.getsockname()[1]}"
        registration = link(http, registry, b)
        registration.start()
        await eventually(lambda: len(attempts) >= 3)
        assert registration.agent_id is None
        async with running(registry_app(str(tmp_path / "r.db")), sock):
            await eventually(lambda: registration.agent_id == "b")
            await registration.aclose()


async def test_wrong_token_is_never_registered(
    http: httpx.AsyncClient, start_peer: PeerFactory, registry_url: str
) -> None:
    b = await start_peer()
    card_url = f"{b.url}/.well-known/agent-card.json"
    registration = RegistryLink(
        http, registry_url, lambda: "wrong", card_url, 0.02, backoff_initial_s=0.01
    )
    registration.start()
    await eventually(lambda: registration.failures >= 2)
    assert registration.agent_id is None
    await registration.aclose()


async def test_a_replica_leaving_keeps_the_registration_of_the_others(
    http: httpx.AsyncClient, start_peer: PeerFactory, registry_url: str
) -> None:
    """Two replicas of one node (one public URL, a shared store): one stops, the other holds on."""
    b = await start_peer()
    first = link(http, registry_url, b, deregister=False)
    second = link(http, registry_url, b, deregister=False)
    first.start()
    second.start()
    await eventually(lambda: first.agent_id == second.agent_id == "b")
    await first.aclose()
    beats = second.heartbeats
    await eventually(lambda: second.heartbeats >= beats + 3)
    assert second.registrations == 1  # never told 404, never re-registered
    assert (await http.get(f"{registry_url}/v1/agents/b")).json()["healthy"] is True
    await second.aclose()
    assert (await http.get(f"{registry_url}/v1/agents/b")).status_code == 200  # left to the TTL


def test_only_a_node_on_a_shared_store_leaves_its_registration_behind(tmp_path: Path) -> None:
    from node.store.memory import MemoryTaskStore
    from node.store.postgres import PostgresTaskStore
    from node.store.sqlite import SqliteTaskStore

    assert shared_store(PostgresTaskStore("postgresql://127.0.0.1:1/unused"))  # not connected
    assert not shared_store(SqliteTaskStore(tmp_path / "t.db"))
    assert not shared_store(MemoryTaskStore())


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_two_replicas_on_postgres_one_stops_the_other_stays_registered(
    http: httpx.AsyncClient, registry_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two node apps, one PostgreSQL store, one public URL: B stopping leaves A registered."""
    monkeypatch.setenv("REG_TOKEN", REGISTRY_TOKEN)
    registry = {"url": registry_url, "token_env": "REG_TOKEN", "heartbeat_s": 0.05}
    card = parse_card(
        {"id": "twin", "name": "Twin", "description": "two replicas", "tools": ["calculate"]}
        | {"peers": {"registry": registry}},
        env={},
    )
    sock_a, sock_b = free_socket(), free_socket()
    public = f"http://127.0.0.1:{sock_a.getsockname()[1]}"

    def app(name: str, store: str) -> ASGIApp:
        return build_node_app(card, public_url=public, data_dir=tmp_path / name, store=store)

    async with fresh_schema(PG_URL) as store:
        a_app = app("a", store)
        async with running(a_app, sock_a):
            async with running(app("b", store), sock_b):
                runtime = a_app.state.node.runtime  # type: ignore[attr-defined]
                a = runtime.registry
                assert a is not None and not a.deregister
                await eventually(lambda: a.heartbeats >= 1)
            beats = a.heartbeats  # B has stopped
            await eventually(lambda: a.heartbeats >= beats + 3)
            assert a.registrations == 1  # never 404, never re-registered
            assert (await http.get(f"{registry_url}/v1/agents/twin")).json()["healthy"] is True
