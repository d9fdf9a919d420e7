"""PostgreSQL: flushed heartbeats are HOT updates, an older table migrates, the sweep is one
statement (see ``PG_HOT_DDL`` in :mod:`node.registry.schema`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text

from node.registry.records import AgentRecord, Skill
from node.registry.schema import PG_FILLFACTOR
from node.registry.store import AgentStore
from tests.registry.conftest import fresh_pg_database

pytestmark = [pytest.mark.postgres]

T0 = 1_700_000_000.0


@pytest.fixture
async def store() -> AsyncIterator[AgentStore]:
    async with fresh_pg_database() as url:
        opened = AgentStore(url)
        await opened.open()
        try:
            yield opened
        finally:
            await opened.close()


def _record(i: int, last_seen: float = T0) -> AgentRecord:
    words = " ".join(f"word{i}x{k}" for k in range(60))  # a wide row, as real cards make
    skills = (Skill(id=f"skill-{i}", name=f"Skill {i}", description=words, tags=("t", f"t{i}")),)
    return AgentRecord(
        id=f"agent-{i}",
        card_url=f"https://cards.example/{i}.json",
        name=f"Agent {i}",
        description=words,
        skills=skills,
        card={"name": f"Agent {i}", "description": words},
        registered_at=T0,
        last_seen=last_seen,
    )


async def _sql(store: AgentStore, statement: str) -> Any:
    async with store._eng().connect() as conn:
        return (await conn.execute(text(statement))).one()


async def _updates(store: AgentStore) -> tuple[int, int]:
    """(updates, HOT updates) of registry_agents, as the statistics have them now."""
    row = await _sql(
        store,
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE relname = 'registry_agents'",
    )
    return int(row[0]), int(row[1])


async def test_a_heartbeat_flush_is_hot_on_every_row(store: AgentStore) -> None:
    await store.save_many([_record(i) for i in range(200)])
    before = await _updates(store)
    assert await store.beat({f"agent-{i}": T0 + 10 for i in range(200)}, {}) == set()
    deadline = time.monotonic() + 15  # statistics reach the shared view within ~1 s of idling
    while (now := await _updates(store))[0] - before[0] < 200:
        assert time.monotonic() < deadline, f"updates never counted: {before} -> {now}"
        await asyncio.sleep(0.1)
    assert (now[0] - before[0], now[1] - before[1]) == (200, 200)
    row = await _sql(store, "SELECT min(last_seen), max(last_seen) FROM registry_agents")
    assert tuple(row) == (T0 + 10, T0 + 10)


async def test_an_older_table_loses_its_last_seen_index_at_start(store: AgentStore) -> None:
    async with store._eng().begin() as conn:  # as versions before HOT heartbeats left it
        await conn.execute(
            text("CREATE INDEX registry_agents_last_seen ON registry_agents (last_seen)")
        )
        await conn.execute(text("ALTER TABLE registry_agents RESET (fillfactor)"))
    await store.close()
    await store.open()
    indexes = await _sql(
        store,
        "SELECT count(*) FILTER (WHERE indexdef LIKE '%last_seen%') FROM pg_indexes "
        "WHERE tablename = 'registry_agents'",
    )
    assert indexes[0] == 0
    options = await _sql(store, "SELECT reloptions FROM pg_class WHERE relname = 'registry_agents'")
    assert options[0] == [f"fillfactor={PG_FILLFACTOR}"]


async def test_the_sweep_is_one_delete_and_takes_only_the_silent(store: AgentStore) -> None:
    await store.save_many([_record(i, T0 + (i % 2) * 100) for i in range(300)])
    seen: list[str] = []

    def log(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement.split()[0].upper())

    event.listen(store._eng().sync_engine, "before_cursor_execute", log)
    try:
        assert await store.sweep(T0 + 50) == 150
    finally:
        event.remove(store._eng().sync_engine, "before_cursor_execute", log)
    assert seen.count("DELETE") == 1 and "UPDATE" not in seen
    left = await _sql(store, "SELECT count(*), min(last_seen) FROM registry_agents")
    assert tuple(left) == (150, T0 + 100)
    terms = await _sql(store, "SELECT count(DISTINCT agent_id) FROM registry_terms")
    assert terms[0] == 150  # their terms went with them (cascade)
