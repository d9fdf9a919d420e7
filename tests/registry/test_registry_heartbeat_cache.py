"""Heartbeats answered from the replica's cache of known agents (:mod:`node.registry.known`).

Real stores (a SQLite file, and PostgreSQL with ``A2A_NODE_TEST_PG_URL``), two replicas in this
process on one database with their background flush slowed down so the test decides when a
replica flushes. Statements are counted on each store's engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from node.registry import RegistrySettings, build_registry_app
from node.registry.heartbeats import HeartbeatBatch
from node.registry.known import KnownAgents
from node.registry.records import AgentRecord
from node.registry.service import Registry
from node.registry.store import AgentStore
from tests.registry.conftest import LOOPBACK, FakeClock, in_process

Replica = tuple[httpx.AsyncClient, Registry]


@pytest.fixture
def replica(db: str, clock: FakeClock) -> Any:
    """``async with replica() as (client, registry)``: one more replica on the test's database."""

    @contextlib.asynccontextmanager
    async def make() -> AsyncIterator[Replica]:
        settings = RegistrySettings(db=db, allow_cidrs=LOOPBACK, heartbeat_flush_s=10)
        app = build_registry_app(settings, clock=clock)
        async with in_process(app) as client:
            yield client, app.state.registry

    return make


@contextlib.contextmanager
def statements(registry: Registry) -> Iterator[list[str]]:
    """The SQL statements ``registry``'s store sends while the block runs."""
    sent: list[str] = []
    engine = registry._store._eng().sync_engine

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


async def register(client: httpx.AsyncClient, card_url: str, status: int = 201) -> Any:
    response = await client.post("/v1/agents", json={"card_url": card_url})
    assert response.status_code == status, response.text
    return response.json()


async def beat(client: httpx.AsyncClient, agent_id: str) -> httpx.Response:
    return await client.put(f"/v1/agents/{agent_id}/heartbeat")


async def test_a_known_agent_beats_without_a_statement(replica, card_server, clock) -> None:
    async with replica() as (a, registry):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        with statements(registry) as first:
            assert (await beat(a, "alpha")).status_code == 200
        assert len(first) == 1 and first[0].lstrip().upper().startswith("SELECT")
        clock.advance(5)
        with statements(registry) as sent:
            for _ in range(3):
                response = await beat(a, "alpha")
                assert response.status_code == 200
        assert sent == []
        body = response.json()
        assert body["name"] == "Alpha" and body["healthy"] is True
        read = (await a.get("/v1/agents/alpha")).json()  # the same entry, read from the store
        assert body == {k: v for k, v in read.items() if k != "card"}
        assert (await beat(a, "alpha")).status_code == 200  # the read above flushed (sweep)
        with statements(registry) as sent:
            await registry.flush()
        assert len([s for s in sent if "UPDATE" in s.upper()]) == 1  # one statement per flush


async def test_a_deletion_through_another_replica_is_404_after_a_flush(
    replica, card_server
) -> None:
    async with replica() as (a, registry), replica() as (b, _):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        assert (await beat(a, "alpha")).status_code == 200  # now known to a
        assert (await b.delete("/v1/agents/alpha")).status_code == 204
        assert (await beat(a, "alpha")).status_code == 200  # known, within the flush period
        await registry.flush()  # the UPDATE does not find the row: a forgets it
        response = await beat(a, "alpha")
        assert response.status_code == 404, response.text
        await registry.flush()
        assert (await beat(a, "alpha")).status_code == 404


async def test_a_registration_through_another_replica_is_seen_after_a_flush(
    replica, card_server
) -> None:
    async with replica() as (a, registry), replica() as (b, _):
        url = card_server.put_card("/a.json", "Alpha", description="old")
        await register(a, url)
        assert (await beat(a, "alpha")).json()["description"] == "old"
        card_server.put_card("/a.json", "Alpha", description="new")
        await register(b, url, status=200)  # rewritten by b: another revision
        await registry.flush()
        assert (await beat(a, "alpha")).json()["description"] == "new"


async def test_a_registration_or_deletion_here_is_seen_at_once(replica, card_server) -> None:
    async with replica() as (a, _):
        url = card_server.put_card("/a.json", "Alpha", description="old")
        await register(a, url)
        assert (await beat(a, "alpha")).json()["description"] == "old"
        card_server.put_card("/a.json", "Alpha", description="new")
        await register(a, url, status=200)
        assert (await beat(a, "alpha")).json()["description"] == "new"
        assert (await a.delete("/v1/agents/alpha")).status_code == 204
        assert (await beat(a, "alpha")).status_code == 404


async def test_unknown_ids_are_404_and_not_remembered(replica) -> None:
    async with replica() as (a, registry):
        for _ in range(2):
            with statements(registry) as sent:
                assert (await beat(a, "nobody")).status_code == 404
            assert len(sent) == 1  # read each time: a registration may have come meanwhile


async def test_misses_arriving_together_are_read_in_one_query(replica, card_server) -> None:
    async with replica() as (a, _), replica() as (_, registry):
        names = [f"Agent{i}" for i in range(8)]
        for name in names:
            await register(a, card_server.put_card(f"/{name}.json", name))
        with statements(registry) as sent:
            beaten = await asyncio.gather(*(registry.heartbeat(n.lower()) for n in names))
        assert [r.id for r in beaten] == [n.lower() for n in names]
        assert len(sent) == 1


async def test_an_agent_not_seen_for_evict_after_is_checked_in_the_store(
    replica, card_server, clock
) -> None:
    async with replica() as (a, registry):
        await register(a, card_server.put_card("/a.json", "Alpha"))
        assert (await beat(a, "alpha")).status_code == 200
        await registry.flush()
        clock.advance(registry.settings.evict_after + 1)
        with statements(registry) as sent:
            assert (await beat(a, "alpha")).status_code == 404
        assert len(sent) == 1


def _record(agent_id: str) -> AgentRecord:
    return AgentRecord(
        id=agent_id,
        card_url=f"http://127.0.0.1:1/{agent_id}.json",
        name=agent_id,
        description="",
        skills=(),
        card={"name": agent_id},
        registered_at=0.0,
        last_seen=0.0,
    )


def test_the_cache_is_bounded_and_keeps_the_recently_used() -> None:
    known = KnownAgents(size=2)
    for agent_id in ("a", "b"):
        known.put(agent_id, "r1", _record(agent_id))
    assert known.get("a") is not None  # "b" is now the least recently used
    known.put("c", "r1", _record("c"))
    assert len(known) == 2 and known.get("b") is None
    assert (found := known.get("a")) is not None and found.card == {}  # no card kept


async def test_a_flush_reports_rows_gone_rewritten_or_set_aside(db: str) -> None:
    store = AgentStore(RegistrySettings(db=db).db_url)
    await store.open()
    try:
        await store.save_many([_record(i) for i in ("rewritten", "aside", "kept", "unasked")])
        revs = {i: s.rev for i, s in (await store.get(["aside", "kept"])).items()}
        assert isinstance(revs["kept"], str) and isinstance(revs["aside"], str)
        await store.set_aside("aside")
        beats = {i: 5.0 for i in ("gone", "rewritten", "aside", "kept", "unasked", "nowhere")}
        expected = {"gone": "r1", "rewritten": "r-before", **revs}
        assert await store.beat(beats, expected) == {"gone", "rewritten", "aside"}
        assert await store.beat(beats, {"kept": revs["kept"]}) == set()  # nothing to read back
        times = {i: s.record.last_seen for i, s in (await store.get(beats)).items()}
        assert times == {"rewritten": 5.0, "aside": 5.0, "kept": 5.0, "unasked": 5.0}
    finally:
        await store.close()


def test_the_flush_drops_what_it_reports_and_asks_only_for_the_kept() -> None:
    known = KnownAgents(size=10)
    for agent_id in ("a", "b"):
        known.put(agent_id, f"rev-{agent_id}", _record(agent_id))
    assert known.revs(["a", "b", "c"]) == {"a": "rev-a", "b": "rev-b"}
    known.drop({"a", "c"})
    assert known.get("a") is None and known.get("b") is not None


def test_a_heartbeat_keeps_its_time_not_its_record() -> None:
    """A heartbeat leaves no new object in the cache (only a float): long-lived objects made
    at 10,000 heartbeats/s made the garbage collector run full collections, 0.3-1 s each."""
    known = KnownAgents(size=10)
    known.put("a", "r1", _record("a"))
    beaten = replace(_record("a"), last_seen=42.0)
    held = sys.getrefcount(beaten)
    known.touch("a", beaten)
    assert sys.getrefcount(beaten) == held  # not kept
    assert (found := known.get("a")) is not None and found.last_seen == 42.0
    assert found == replace(beaten, card={})  # the card is never kept


def test_the_hit_path_queues_and_remembers_as_a_heartbeat_does(db: str) -> None:
    """:meth:`HeartbeatBatch.hit` (the route's path with no record made): a remembered, live
    agent is queued and remembered at ``now``; an unknown one, or one whose newest time
    (remembered or queued) is before the eviction cutoff, is left to the full path."""
    known = KnownAgents(size=10)
    batch = HeartbeatBatch(AgentStore(RegistrySettings(db=db).db_url), 1.0, known)
    for agent_id in ("a", "b"):
        known.put(agent_id, "r1", _record(agent_id))  # last seen at 0
    assert batch.hit("nobody", 5.0, -85.0) is None and len(batch) == 0
    assert batch.hit("a", 91.0, 1.0) is None  # silent for 91 s of 90: read by the full path
    assert len(batch) == 0 and (found := known.get("a")) is not None and found.last_seen == 0
    batch.add("a", 50.0)  # queued by an earlier heartbeat: it counts
    entry = batch.hit("a", 91.0, 1.0)
    assert entry is not None and entry.last_seen == 91.0 and batch.queued("a") == 91.0
    assert known.get("a") == replace(_record("a"), last_seen=91.0, card={})
    known.put("c", "r1", _record("c"))
    assert batch.hit("b", 60.0, -30.0) is not None  # now the most recently used
    known.put("d", "r1", _record("d"))
    known.size = 3
    known.put("e", "r1", _record("e"))  # drops the least recently used: "a", not "b"
    assert known.get("a") is None and known.get("b") is not None
    batch.add("b", 70.0)
    assert batch.hit("b", 65.0, -25.0) is not None and batch.queued("b") == 70.0  # never back
