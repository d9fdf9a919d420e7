"""The registry's REST API in-process, fetching real cards from a loopback card server."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx


async def register(client: httpx.AsyncClient, url: str, **kw: Any) -> httpx.Response:
    return await client.post("/v1/agents", json={"card_url": url}, **kw)


async def test_register_returns_201_with_the_entry(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card(
        "/echo.json", "Echo Agent", skills=[card_server.skill("echo", "text")]
    )
    response = await register(client, url)
    assert response.status_code == 201
    body = response.json()
    assert body["id"] == "echo-agent"
    assert body["name"] == "Echo Agent"
    assert body["card_url"] == url
    assert body["healthy"] is True
    assert body["skills"] == [{"id": "echo", "name": "Echo", "description": "", "tags": ["text"]}]
    assert body["card"]["name"] == "Echo Agent"


async def test_get_returns_the_entry_with_its_card(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Alpha", description="first of all")
    await register(client, url)
    response = await client.get("/v1/agents/alpha")
    assert response.status_code == 200
    assert response.json()["card"]["description"] == "first of all"


async def test_agent_id_comes_from_the_card_extension(
    client: httpx.AsyncClient, card_server
) -> None:
    url = card_server.put_card("/a.json", "Some Name", agent_id="node-7")
    assert (await register(client, url)).json()["id"] == "node-7"


async def test_delete_removes_the_agent(client: httpx.AsyncClient, card_server) -> None:
    await register(client, card_server.put_card("/a.json", "Alpha"))
    assert (await client.delete("/v1/agents/alpha")).status_code == 204
    assert (await client.get("/v1/agents/alpha")).status_code == 404
    assert (await client.get("/v1/agents")).json()["agents"] == []


async def test_reregistering_the_same_url_updates_the_entry(
    client: httpx.AsyncClient, card_server
) -> None:
    url = card_server.put_card("/a.json", "Alpha", agent_id="a", description="old")
    assert (await register(client, url)).status_code == 201
    card_server.put_card("/a.json", "Alpha Two", agent_id="a", description="new")
    response = await register(client, url)
    assert response.status_code == 200
    agents = (await client.get("/v1/agents")).json()["agents"]
    assert [(a["id"], a["name"], a["description"]) for a in agents] == [("a", "Alpha Two", "new")]


async def test_reregistering_with_a_new_id_replaces_the_old_entry(
    client: httpx.AsyncClient, card_server
) -> None:
    url = card_server.put_card("/a.json", "Alpha", agent_id="a")
    await register(client, url)
    card_server.put_card("/a.json", "Alpha", agent_id="b")
    assert (await register(client, url)).status_code == 200
    agents = (await client.get("/v1/agents")).json()["agents"]
    assert [a["id"] for a in agents] == ["b"]


async def test_same_id_from_another_url_is_a_conflict(
    client: httpx.AsyncClient, card_server
) -> None:
    await register(client, card_server.put_card("/a.json", "Alpha", agent_id="x"))
    response = await register(client, card_server.put_card("/b.json", "Beta", agent_id="x"))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert [a["name"] for a in (await client.get("/v1/agents")).json()["agents"]] == ["Alpha"]


async def test_heartbeat_extends_expiry(client: httpx.AsyncClient, card_server, clock) -> None:
    await register(client, card_server.put_card("/a.json", "Alpha"))
    before = (await client.get("/v1/agents/alpha")).json()["expires_at"]
    clock.advance(10)
    response = await client.put("/v1/agents/alpha/heartbeat")
    assert response.status_code == 200
    assert response.json()["expires_at"] > before
    assert response.json()["healthy"] is True


async def test_heartbeat_for_unknown_id_is_404(client: httpx.AsyncClient) -> None:
    response = await client.put("/v1/agents/nobody/heartbeat")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_missed_heartbeats_make_an_agent_unhealthy_then_evicted(
    client: httpx.AsyncClient, card_server, clock
) -> None:
    await register(client, card_server.put_card("/a.json", "Alpha"))
    await register(client, card_server.put_card("/b.json", "Beta"))
    clock.advance(31)  # past the 30 s TTL
    await client.put("/v1/agents/beta/heartbeat")
    listed = {a["id"]: a["healthy"] for a in (await client.get("/v1/agents")).json()["agents"]}
    assert listed == {"alpha": False, "beta": True}
    unhealthy = (await client.get("/v1/agents", params={"healthy": "false"})).json()["agents"]
    assert [a["id"] for a in unhealthy] == ["alpha"]
    healthy = (await client.get("/v1/agents", params={"healthy": "true"})).json()["agents"]
    assert [a["id"] for a in healthy] == ["beta"]

    clock.advance(60)  # alpha: 91 s without a heartbeat > 3 x TTL
    assert (await client.get("/v1/agents/alpha")).status_code == 404
    assert [a["id"] for a in (await client.get("/v1/agents")).json()["agents"]] == ["beta"]
    assert (await client.put("/v1/agents/alpha/heartbeat")).status_code == 404


async def test_eviction_deletes_from_the_database(make_client, card_server, clock) -> None:
    async with make_client() as client:
        await register(client, card_server.put_card("/a.json", "Alpha"))
        clock.advance(91)
        await client.get("/v1/agents")  # a read sweeps lazily
    clock.now -= 91  # a new process whose clock says the entry would still be fresh
    async with make_client() as client:
        assert (await client.get("/v1/agents")).json()["agents"] == []


async def test_a_restart_after_a_long_outage_evicts_nobody_before_agents_could_beat(
    make_client, card_server, clock
) -> None:
    """The registry's own downtime is no missed heartbeat: after an hour down (evict_after is
    90 s) it still lists and accepts heartbeats of every entry, and evicts only those silent
    for 90 s after its return."""
    async with make_client() as client:
        await register(client, card_server.put_card("/a.json", "Alpha"))
        await register(client, card_server.put_card("/b.json", "Beta"))
    clock.advance(3600)
    async with make_client(sweep_interval_s=0.01) as client:
        listed = {a["id"]: a["healthy"] for a in (await client.get("/v1/agents")).json()["agents"]}
        assert listed == {"alpha": False, "beta": False}  # kept; unhealthy until they beat
        assert (await client.get("/v1/agents/alpha")).status_code == 200
        beat = await client.put("/v1/agents/beta/heartbeat")
        assert beat.status_code == 200 and beat.json()["healthy"] is True
        clock.advance(60)
        assert (await client.put("/v1/agents/beta/heartbeat")).status_code == 200
        clock.advance(31)  # alpha: silent for 91 s since the return
        assert [a["id"] for a in (await client.get("/v1/agents")).json()["agents"]] == ["beta"]
        assert (await client.put("/v1/agents/alpha/heartbeat")).status_code == 404
    clock.now -= 91  # a new process: alpha was deleted by the sweep, not only left out
    async with make_client() as client:
        assert [a["id"] for a in (await client.get("/v1/agents")).json()["agents"]] == ["beta"]


async def test_the_background_sweep_evicts_without_reads(make_client, card_server, clock) -> None:
    async with make_client(sweep_interval_s=0.01) as client:
        await register(client, card_server.put_card("/a.json", "Alpha"))
        clock.advance(91)
        deadline = time.monotonic() + 5
        while (await client.get("/healthz")).json()["agents"] != 0:
            assert time.monotonic() < deadline, "the sweep never ran"
            await asyncio.sleep(0.01)


async def test_registrations_survive_a_restart(make_client, card_server) -> None:
    async with make_client() as client:
        await register(
            client, card_server.put_card("/a.json", "Alpha", skills=[card_server.skill("s", "t")])
        )
        await register(client, card_server.put_card("/b.json", "Beta"))
        await client.delete("/v1/agents/beta")
    async with make_client() as client:
        agents = (await client.get("/v1/agents", params={"tag": "t"})).json()["agents"]
        assert [a["id"] for a in agents] == ["alpha"]
        assert (await client.get("/v1/agents/beta")).status_code == 404
        assert (await client.get("/v1/agents/alpha")).json()["card"]["name"] == "Alpha"


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "agents": 0, "unreadable": 0}
