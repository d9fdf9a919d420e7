"""The rows text searches read besides the agent rows (PostgreSQL's ``registry_search``,
SQLite's ``registry_order`` and FTS tables) are built at start for a store of an older version
and kept in step by every write; partial names and words give the pages the rules give, on
both engines, whichever plan answers (the window in page order or the text indexes)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import text

from bench.registry_scale import Population
from node.registry import name_order
from node.registry import store as store_module
from node.registry.records import AgentRecord
from node.registry.search_sql import Filter
from node.registry.store import AgentStore
from tests.registry.test_registry_bulk_load import OLDER_LAYOUT, opened, stored
from tests.registry.test_registry_search_engines import expected

NOW = 1_000.0
OLD_PG_INDEXES = (  # where versions before registry_search kept the text indexes
    "CREATE INDEX registry_agents_words ON registry_agents "
    "USING gin (array_to_tsvector(string_to_array(words, ' ')))",
    "CREATE INDEX registry_agents_names ON registry_agents USING gin (name_key gin_trgm_ops)",
)


async def in_step(store: AgentStore) -> None:
    """One search row per served agent row, holding its key and words."""
    await stored(store)  # SQLite: registry_order and the FTS tables
    if store.dialect != "postgresql":
        return
    async with store._eng().connect() as conn:
        rows = await conn.execute(text("SELECT * FROM registry_search ORDER BY 1"))
        served = await conn.execute(
            text(
                "SELECT id, name_key, words FROM registry_agents "
                "WHERE name_key IS NOT NULL ORDER BY 1"
            )
        )
        assert rows.all() == served.all()


async def pages(store: AgentStore, size: int, **params: Any) -> list[str]:
    """Every id a search finds, page by page (the cursor as the API passes it)."""
    got: list[str] = []
    after = None
    while True:
        page = await store.search(Filter(**params, seen_after=NOW - 90, after=after, limit=size))
        got += [key[1] for key, _ in page]
        if len(page) < size:
            return got
        after = page[-1][0]


async def answers_by_the_rules(
    store: AgentStore, records: list[AgentRecord], queries: list[str], monkeypatch: Any
) -> None:
    for window in (store_module.WINDOW, 4):  # the window fills the page, or the indexes do
        monkeypatch.setattr(store_module, "WINDOW", window)
        for q in queries:
            want = expected(records, NOW, q=q)
            for size in (2, 7, 500):
                assert await pages(store, size, q=q) == want, (q, window, size)


def partial_names(records: list[AgentRecord]) -> list[str]:
    """Parts of names: common (many brands hold it), rare (one brand), inside a word, across a
    space, none; and words of descriptions."""
    brand = records[0].name.split()[0].casefold()
    return [
        brand[:3],
        brand[1:5],
        brand,
        records[1].name.casefold()[-9:],  # across the space before the role
        records[2].name.split()[1][:4].casefold(),
        "zzqx",
        "reliable",
        "rel",
    ]


async def test_an_older_store_gets_its_search_rows_at_start(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    population = Population()
    records = [population.agent(i, NOW - i % 3)[0] for i in range(300)]
    store = await opened(db)
    try:
        await store.save_many(records)
        await in_step(store)
        async with store._eng().begin() as conn:  # as an older version left it
            if store.dialect == "postgresql":
                await conn.execute(text("DROP TABLE registry_search"))
                for statement in OLD_PG_INDEXES:
                    await conn.execute(text(statement))
            else:
                for statement in OLDER_LAYOUT:
                    await conn.execute(text(statement))
    finally:
        await store.close()
    store = await opened(db)
    try:
        await in_step(store)  # built at start, from the served rows
        if store.dialect == "postgresql":
            async with store._eng().connect() as conn:
                names = await conn.scalars(
                    text("SELECT indexname FROM pg_indexes WHERE tablename = 'registry_agents'")
                )
                assert not {"registry_agents_words", "registry_agents_names"} & set(names)
        await answers_by_the_rules(store, records, partial_names(records), monkeypatch)
    finally:
        await store.close()


async def test_every_write_keeps_the_search_rows_in_step(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-registration under a new name, set-aside rows, deletion and the sweep: the old name
    no longer finds the agent, the new one does, and gone rows are found by nothing."""
    population = Population()
    records = [population.agent(i, NOW - (100 if i % 10 == 0 else i % 3))[0] for i in range(200)]
    store = await opened(db)
    try:
        await store.save_many(records)
        old_name = records[3].name
        renamed = replace(records[3], name="Qwxvz Renamed Agent", last_seen=NOW)
        await store.save(renamed, live_after=NOW - 30)
        records[3] = renamed
        await store.set_aside(records[4].id)
        await store.delete([records[5].id])
        records = [r for r in records if r.id not in (records[4].id, records[5].id)]
        await in_step(store)
        queries = [*partial_names(records), "qwxvz", "renamed", old_name.casefold()]
        await answers_by_the_rules(store, records, queries, monkeypatch)
        assert await store.sweep(NOW - 90) == 20  # every tenth, last seen 100 s ago
        await in_step(store)
        records = [r for r in records if r.last_seen >= NOW - 90]
        await answers_by_the_rules(store, records, queries, monkeypatch)
        assert await store.counts() == (len(records), 1)  # the row set aside stays
    finally:
        await store.close()


async def test_ties_and_taken_slots_page_by_the_rules(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many names alike: identical names (ordered by id), names sharing far more than the
    bytes an ``ord`` holds (one group on SQLite), names beyond ASCII; and on SQLite every
    row's first slot taken (a group's rows then wait for a free one). Pages of every size,
    the cursor crossing ties, healthy and unhealthy rows, before and after writes."""
    name, arity, _ = name_order.SQL_FUNCTION

    def first_try_taken(key: str, rowid: int, attempt: int) -> int | None:
        return name_order.ord_of(key, rowid if attempt else 0, attempt)

    monkeypatch.setattr(name_order, "SQL_FUNCTION", (name, arity, first_try_taken))
    population = Population()
    records = [population.agent(i, NOW - i % 3)[0] for i in range(60)]
    alike = ["Tiebreak Agent"] * 9 + [f"Tiebreak Agent {i:02d}" for i in range(20)]
    alike += ["Tiebreaker", "TIEBREAK agent", "Tiébreak Agent", "Tiebreak 日本 Agent"]
    for i, name in enumerate(alike):
        base = population.agent(1_000 + i, NOW - (40 if i % 4 == 0 else i % 3))[0]
        records.append(replace(base, name=name, id=f"tie-{(i * 7) % len(alike):03d}"))
    store = await opened(db)
    try:
        await store.save_many(records)
        await in_step(store)
        queries = ["tiebreak", "iebrea", "agent 1", "tiebreak agent", "日本", "ébr", "zzqx"]
        for window in (store_module.WINDOW, 4):
            monkeypatch.setattr(store_module, "WINDOW", window)
            for q in queries:
                assert await pages(store, 3, q=q) == expected(records, NOW, q=q), q
                for healthy in (True, False):
                    want = expected(records, NOW, q=q, healthy=str(healthy).lower())
                    got = await pages(store, 2, q=q, healthy=healthy, healthy_after=NOW - 30)
                    assert got == want, (q, healthy, window)
        gone = [r.id for r in records if r.id.startswith("tie-00")]
        await store.delete(gone)
        renamed = replace(records[-5], name="Tiebreak Agent 99", last_seen=NOW)
        await store.save(renamed, live_after=NOW - 30)
        records = [renamed if r.id == renamed.id else r for r in records if r.id not in gone]
        await in_step(store)
        await answers_by_the_rules(store, records, queries, monkeypatch)
    finally:
        await store.close()
