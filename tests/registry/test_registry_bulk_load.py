"""A bulk load (``AgentStore.bulk_load``: indexes and FTS entries built at the end) serves what
row-by-row writes serve, and the scale bench's directly built rows are what ``save`` writes."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from bench.registry_scale import Population
from node.errors import RegistryError
from node.registry import RegistrySettings, name_order
from node.registry import store as store_module
from node.registry.records import AgentRecord
from node.registry.schema import agents, query_words, terms
from node.registry.search_sql import Filter
from node.registry.store import AgentStore, Stored, async_url
from tests.registry.test_registry_search_engines import expected

SERVED_KEYS = (
    "SELECT rowid, name_key, id, words FROM registry_agents WHERE name_key IS NOT NULL ORDER BY 1"
)


async def opened(db: str) -> AgentStore:
    store = AgentStore(async_url(RegistrySettings(db=db).db_url))
    await store.open()
    return store


async def stored(store: AgentStore) -> tuple[list[Any], list[Any]]:
    """Every agent row (``rev`` aside: random at each write) and every term row."""
    async with store._eng().connect() as conn:
        columns = [c for c in agents.columns if c.name != "rev"]
        rows = (await conn.execute(select(*columns).order_by(agents.c.id))).all()
        found = (await conn.execute(select(terms).order_by(*terms.c))).all()
        if store.dialect == "sqlite":
            await sqlite_search_rows_in_step(conn)
    return [tuple(r) for r in rows], [tuple(t) for t in found]


async def sqlite_search_rows_in_step(conn: Any) -> None:
    """One ``registry_order`` row per served row, its ``ord`` in its name's group; the FTS
    tables hold exactly each served row's tokens at its ``ord`` (nothing left by a delete)."""
    served = (await conn.execute(text(SERVED_KEYS))).all()
    order = (await conn.execute(text("SELECT * FROM registry_order ORDER BY agent_rowid"))).all()
    assert [o[1:] for o in order] == [s[:3] for s in served]
    assert all(o[0] >> name_order.SLOT_BITS == name_order.prefix(o[2]) for o in order)
    ords = {o[1]: o[0] for o in order}
    want = {"registry_names": set(), "registry_words": set()}
    for rowid, key, _, words in served:
        want["registry_names"].update((key[i : i + 3], ords[rowid], i) for i in range(len(key) - 2))
        want["registry_words"].update((w, ords[rowid], i) for i, w in enumerate(words.split()))
    for name, tokens in want.items():
        await conn.execute(text(f"INSERT INTO {name}({name}) VALUES ('integrity-check')"))
        vocab = f"temp.{name}_instances"
        instances = f"fts5vocab(main, {name}, 'instance')"
        await conn.execute(text(f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} USING {instances}"))
        found = (await conn.execute(text(f"SELECT term, doc, offset FROM {vocab}"))).all()
        assert sorted(found) == sorted(tokens), name


async def found_by_every_term(store: AgentStore, agent_id: str, words: str, name: str) -> None:
    """Each of its skills, tags, words, word beginnings and a part of its name finds the agent
    (a page that is not full is answered by the terms, word and name indexes)."""
    found = (await stored(store))[1]
    filters = [Filter(skill=t[1]) if t[0] == "s" else Filter(tag=t[1]) for t in found]
    filters += [Filter(q=w) for w in words.split()] + [Filter(q=w[:3]) for w in words.split()]
    filters.append(Filter(q=name.casefold()[2:7]))  # inside the name
    for f in filters:
        assert agent_id in {key[1] for key, _ in await store.search(f)}, f


async def test_generated_rows_filled_in_bulk_are_what_save_writes(db: str) -> None:
    population = Population()
    record, _ = population.agent(5, 1_000.0)
    store = await opened(db)
    try:
        async with store.bulk_load():
            await store.save_many(population.rows(5, 6, 1_000.0))
        bulk = await stored(store)
        assert [r[0] for r in bulk[0]] == [record.id] and bulk[1]
        words = " ".join(dict.fromkeys(query_words(record.name + " " + record.description)))
        await found_by_every_term(store, record.id, words, record.name)
        await store.delete([record.id])
        assert await stored(store) == ([], [])
        await store.save(record, live_after=0.0)
        assert await stored(store) == bulk
        await found_by_every_term(store, record.id, words, record.name)
    finally:
        await store.close()


async def test_bulk_load_fills_only_an_empty_store_and_then_serves_every_search(db: str) -> None:
    population = Population()
    records = [population.agent(i, 1_000.0)[0] for i in range(600)]
    store = await opened(db)
    try:
        async with store.bulk_load():
            await store.save_many(population.rows(0, 300, 1_000.0))
            await store.save_many(population.rows(300, 600, 1_000.0))
        await stored(store)  # SQLite's FTS tables pass their integrity check
        with pytest.raises(RegistryError, match="empty"):
            async with store.bulk_load():
                pass
        queries = [{"q": q} for q in ("fin", "robust", "lawyers", "nexx", "zzz", "analysts fa")]
        queries += [{"skill": s} for s in population.skills[:3]]
        queries += [{"tag": t} for t in population.tags[:3]]
        total = 0
        for params in queries:
            want = expected(records, 1_000.0, **params)
            got = [key[1] for key, _ in await store.search(Filter(**params, limit=600))]
            assert got == want, params
            total += len(want)
        assert total > 300  # the queries find something
    finally:
        await store.close()


async def test_a_row_searched_again_shows_its_heartbeat_and_its_rewrite(db: str) -> None:
    """Searches keep rows decoded by (id, rev): a heartbeat (same rev) and a rewrite (new rev)
    still show at once."""
    population = Population()
    record = population.agent(7, 1_000.0)[0]
    light = replace(record, card={})  # what a search reads
    store = await opened(db)
    try:
        await store.save(record, live_after=0.0)
        f = Filter(skill=record.skills[0].id)

        async def only() -> AgentRecord:
            [(_, found)] = await store.search(f)
            assert isinstance(found, Stored)
            return found.record

        assert await only() == light
        await store.beat({record.id: 1_050.0})
        assert await only() == replace(light, last_seen=1_050.0)
        renamed = replace(record, name="Renamed Agent", last_seen=1_060.0)
        await store.save(renamed, live_after=2_000.0)
        assert await only() == replace(renamed, card={})
    finally:
        await store.close()


OLDER_LAYOUT = (  # before registry_order: FTS5 over registry_agents at its rowids (4452c5f)
    "DROP TABLE registry_order",
    "DROP TABLE registry_words",
    "DROP TABLE registry_names",
    "CREATE VIRTUAL TABLE registry_words USING fts5(words, content='registry_agents', "
    "content_rowid='rowid', tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")",
    "CREATE VIRTUAL TABLE registry_names USING fts5(name_key, content='registry_agents', "
    "content_rowid='rowid', tokenize='trigram case_sensitive 1')",
    "INSERT INTO registry_words(registry_words) VALUES ('rebuild')",
    "INSERT INTO registry_names(registry_names) VALUES ('rebuild')",
    "CREATE TABLE registry_keys "
    "(agent_rowid INTEGER PRIMARY KEY, name_key TEXT NOT NULL, id TEXT NOT NULL)",
    "INSERT INTO registry_keys SELECT rowid, name_key, id FROM registry_agents "
    "WHERE name_key IS NOT NULL",
)


def to_older_layout(db: str) -> None:
    """Turn a SQLite file into what the version before ``registry_order`` wrote."""
    with sqlite3.connect(db) as conn:
        for statement in OLDER_LAYOUT:
            conn.execute(statement)


async def test_an_older_sqlite_file_gets_its_ordered_search_rows_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file from before ``registry_order`` (FTS5 tables at the agents' rowids, sort keys in
    ``registry_keys``) is given the new layout at the next start, from its served rows;
    searches found by the text indexes then read it, the cursor walking pages of 2, and every
    write after keeps it in step (registrations, deletions, set-aside rows, the sweep)."""
    monkeypatch.setattr(store_module, "WINDOW", 4)  # pages come from the text indexes
    db = str(tmp_path / "registry.db")
    population = Population()
    records = [population.agent(i, 1_000.0 + i % 3)[0] for i in range(300)]
    store = await opened(db)
    try:
        await store.save_many(records)
    finally:
        await store.close()
    to_older_layout(db)
    store = await opened(db)
    try:
        await stored(store)  # rebuilt: one order row and its tokens per served row
        with sqlite3.connect(db) as conn:
            left = "SELECT name FROM sqlite_master WHERE name = 'registry_keys'"
            assert conn.execute(left).fetchall() == []
        brand = records[0].name.casefold()[1:5]  # inside names, and no word begins with it
        queries = [{"q": brand}, {"q": records[1].name.split()[0]}, {"q": "zzz"}]
        for params in queries:  # a page of 2: the cursor walks the sorted keys too
            want = expected(records, 1_000.0, **params)
            assert want or params["q"] == "zzz", params
            got: list[str] = []
            after = None
            while True:
                page = await store.search(Filter(**params, after=after, limit=2))
                got += [key[1] for key, _ in page]
                if len(page) < 2:
                    break
                after = page[-1][0]
            assert got == want, params
        await store.set_aside(records[0].id)
        await store.delete([records[1].id])
        await store.save(replace(records[2], name="Renamed"), live_after=5_000.0)
        assert await store.sweep(1_001.0) == 100  # last seen at 1,000.0
        await stored(store)
    finally:
        await store.close()
