"""Registry replicas on one database: batched heartbeats, shared reads, one sweeper.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture). The replicas here are two apps
in this process with their background flush slowed down, so the test decides when a replica
flushes (``registry.flush()``); every read goes to the database, so a committed registration or
deletion is seen by every replica at once. The multi-process test at the end runs two registry
processes with the default timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from node.registry import RegistrySettings, build_registry_app
from node.registry.service import Registry
from node.registry.store import SWEEP_LOCK, async_url
from tests.registry.conftest import LOOPBACK, FakeClock, fresh_pg_database, in_process
from tests.registry.test_registry_process import free_port, start, stop

Replica = tuple[httpx.AsyncClient, Registry]


@pytest.fixture
def replica(db: str, clock: FakeClock) -> Any:
    """``async with replica() as (client, registry)``: one more replica on the test's database."""

    @contextlib.asynccontextmanager
    async def make(**overrides: Any) -> AsyncIterator[Replica]:
        settings = RegistrySettings(
            db=db,
            allow_cidrs=LOOPBACK,
            heartbeat_flush_s=10,  # the test flushes by hand
            **overrides,
        )
        app = build_registry_app(settings, clock=clock)
        async with in_process(app) as client:
            yield client, app.state.registry

    return make


async def register(client: httpx.AsyncClient, card_url: str, status: int = 201) -> Any:
    response = await client.post("/v1/agents", json={"card_url": card_url})
    assert response.status_code == status, response.text
    return response.json()


async def test_heartbeats_are_written_in_one_batch(replica, card_server, clock) -> None:
    async with replica() as (a, registry), replica() as (b, _):
        for name in ("Alpha", "Beta", "Gamma"):
            await register(a, card_server.put_card(f"/{name}.json", name))
        clock.advance(20)
        writes = registry.write_transactions
        for agent_id in ("alpha", "beta", "gamma", "alpha"):
            assert (await a.put(f"/v1/agents/{agent_id}/heartbeat")).status_code == 200
        assert registry.write_transactions == writes  # queued, not written
        await registry.flush()
        assert registry.write_transactions == writes + 1  # one transaction, one statement
        assert (await a.get("/v1/agents/beta")).json()["healthy"] is True
        beta = (await b.get("/v1/agents/beta")).json()
        assert beta["last_heartbeat"] == (await a.get("/v1/agents/beta")).json()["last_heartbeat"]


async def test_queued_heartbeats_are_written_at_shutdown(replica, card_server, clock) -> None:
    async with replica() as (a, _):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        clock.advance(80)
        assert (await a.put("/v1/agents/alpha/heartbeat")).status_code == 200
    clock.advance(20)  # 100 s after registering, 20 s after the heartbeat
    async with replica() as (b, _):
        alpha = (await b.get("/v1/agents/alpha")).json()
        assert alpha["healthy"] is True


async def test_replicas_see_registrations_updates_and_deletions_at_once(
    replica, card_server
) -> None:
    async with replica() as (a, _), replica() as (b, _):
        url = card_server.put_card("/a.json", "Alpha", skills=[card_server.skill("s1", "t")])
        await register(a, url)
        found = (await b.get("/v1/agents", params={"tag": "t", "include_card": "true"})).json()
        assert [(x["id"], x["card"]["skills"][0]["id"]) for x in found["agents"]] == [
            ("alpha", "s1")
        ]
        card_server.put_card("/a.json", "Alpha", skills=[card_server.skill("s2", "u")])
        await register(a, url, status=200)
        assert (await b.get("/v1/agents", params={"tag": "t"})).json()["agents"] == []
        found = (await b.get("/v1/agents", params={"tag": "u", "include_card": "true"})).json()
        assert [x["card"]["skills"][0]["id"] for x in found["agents"]] == ["s2"]  # no stale card
        assert (await b.get("/v1/agents/alpha")).json()["skills"][0]["id"] == "s2"
        assert (await a.delete("/v1/agents/alpha")).status_code == 204
        assert (await b.get("/v1/agents/alpha")).status_code == 404
        assert (await b.get("/healthz")).json()["agents"] == 0


async def test_a_heartbeat_for_an_agent_registered_elsewhere_reads_the_store(
    replica, card_server
) -> None:
    async with replica() as (a, _), replica() as (b, _):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        await register(a, card_server.put_card("/c.json", "Gamma"))
        assert (await b.put("/v1/agents/alpha/heartbeat")).status_code == 200
        assert (await b.delete("/v1/agents/gamma")).status_code == 204
        assert (await b.put("/v1/agents/nobody/heartbeat")).status_code == 404
        assert (await a.put("/v1/agents/gamma/heartbeat")).status_code == 404  # deleted by b


async def test_a_sweep_keeps_agents_another_replica_heartbeats(replica, card_server, clock) -> None:
    async with replica() as (a, registry), replica() as (b, other):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        await register(a, card_server.put_card("/b.json", "Beta"))
        clock.advance(80)
        assert (await a.put("/v1/agents/alpha/heartbeat")).status_code == 200
        await registry.flush()  # the batch lands within heartbeat_flush_s
        clock.advance(35)  # alpha: 35 s since its heartbeat; beta: 115 s since registering,
        # past evict_after (90 s) plus, on PostgreSQL, the 2 * heartbeat_flush_s grace
        assert await other.sweep() == 1  # beta only, judged by the store
        assert (await a.get("/v1/agents/alpha")).status_code == 200
        assert (await a.get("/v1/agents/beta")).status_code == 404
        assert (await b.put("/v1/agents/alpha/heartbeat")).status_code == 200


async def test_registering_the_same_card_again_writes_nothing(replica, card_server) -> None:
    async with replica() as (a, registry), replica() as (b, _):
        card = card_server.card("Alpha", agent_id="alpha")
        url = card_server.put("/one.json", card)
        first = await register(a, url)
        writes = registry.write_transactions
        again = await register(a, url, status=200)
        assert registry.write_transactions == writes
        assert again["registered_at"] == first["registered_at"]
        # a second replica of the same node, serving the same card from its own address
        other = await register(b, card_server.put("/two.json", card), status=200)
        assert other["card_url"] == url
        changed = card_server.card("Alpha v2", agent_id="alpha")
        response = await b.post(
            "/v1/agents", json={"card_url": card_server.put("/three.json", changed)}
        )
        assert response.status_code == 409
        assert "share one public URL" in response.json()["error"]["message"]


@pytest.mark.postgres
@pytest.mark.parametrize("db", ["postgres"], indirect=True)  # the sweep lock is PostgreSQL's
async def test_only_one_replica_sweeps_at_a_time(replica, card_server, clock, db) -> None:
    import asyncpg

    async with replica() as (a, registry):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        clock.advance(120)  # evict_after 90 s + the 2 * heartbeat_flush_s grace
        holder = await asyncpg.connect(async_url(db).replace("+asyncpg", ""))
        try:
            await holder.execute(f"SELECT pg_advisory_lock({SWEEP_LOCK})")
            assert await registry.sweep() == 0  # another replica is sweeping
            assert await holder.fetchval("SELECT count(*) FROM registry_agents") == 1
            await holder.execute(f"SELECT pg_advisory_unlock({SWEEP_LOCK})")
            assert await registry.sweep() == 1
        finally:
            await holder.close()


async def _eventually(check: Any, deadline_s: float, what: str) -> float:
    """Poll ``check()`` until it is true; return the seconds it took (fail after the deadline)."""
    start = time.monotonic()
    while not await check():
        assert time.monotonic() - start < deadline_s, f"{what} took longer than {deadline_s}s"
        await asyncio.sleep(0.02)
    return time.monotonic() - start


@pytest.mark.postgres
@pytest.mark.network
async def test_two_registry_processes_agree_within_two_seconds(settings, card_server) -> None:
    if not os.environ.get("A2A_NODE_TEST_PG_URL"):
        pytest.skip("needs A2A_NODE_TEST_PG_URL")
    async with fresh_pg_database() as db, contextlib.AsyncExitStack() as stack:
        clients = []
        for _ in range(2):
            s = settings.model_copy(update={"db": db, "port": free_port()})
            process = await start(s)
            stack.push_async_callback(stop, process)
            clients.append(await stack.enter_async_context(httpx.AsyncClient(base_url=s.base_url)))
        a, b = clients
        url = card_server.put_card("/a.json", "Alpha", agent_id="alpha")

        async def b_sees(name: str | None) -> bool:
            response = await b.get("/v1/agents/alpha")
            return response.status_code == 404 if name is None else (
                response.status_code == 200 and response.json()["name"] == name
            )  # fmt: skip

        await register(a, url)
        await _eventually(lambda: b_sees("Alpha"), 2.0, "a registration")
        card_server.put_card("/a.json", "Alpha Two", agent_id="alpha")
        await register(a, url, status=200)
        await _eventually(lambda: b_sees("Alpha Two"), 2.0, "an update")
        beat = (await a.put("/v1/agents/alpha/heartbeat")).json()["last_heartbeat"]

        async def b_has_beat() -> bool:
            return bool((await b.get("/v1/agents/alpha")).json()["last_heartbeat"] == beat)

        await _eventually(b_has_beat, 3.0, "a heartbeat (flush + poll)")
        assert (await a.delete("/v1/agents/alpha")).status_code == 204
        await _eventually(lambda: b_sees(None), 2.0, "a deletion")
