"""The bulk write (``rows_of`` + ``save_many``, the import's path) stores exactly the rows that
``save`` stores, record by record: the same columns (``rev`` aside: random at each write) and
the same term rows, on both engines."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sqlalchemy import select

from bench.registry_scale import Population
from node.registry import RegistrySettings
from node.registry.records import AgentRecord, Skill
from node.registry.schema import agents, terms
from node.registry.store import AgentStore, async_url, rows_of


async def _rows(store: AgentStore) -> tuple[list[Any], list[Any]]:
    async with store._eng().connect() as conn:
        columns = [c for c in agents.columns if c.name != "rev"]
        found = (await conn.execute(select(*columns).order_by(agents.c.id))).all()
        term_rows = (await conn.execute(select(terms).order_by(*terms.c))).all()
        revs = (await conn.execute(select(agents.c.rev))).scalars().all()
    assert all(isinstance(r, str) and len(r) == 32 for r in revs)
    return [tuple(r) for r in found], [tuple(t) for t in term_rows]


def _records() -> list[AgentRecord]:
    population = Population()
    records = [population.agent(i, 1_000.0 + i / 7)[0] for i in range(40)]
    odd = Skill(id="ß-skill", name="Straße", description="x" * 120, tags=("ÉTÉ", "a b"))
    records[3] = replace(records[3], name="Große ÅGENT " + "w" * 101, skills=(odd,))
    records[4] = replace(records[4], card_etag=None, skills=())
    return records


async def test_save_many_stores_what_save_stores(db: str) -> None:
    records = _records()
    texts = {records[5].id: json.dumps(records[5].card, indent=2, ensure_ascii=False)}
    one_by_one = AgentStore(async_url(RegistrySettings(db=db).db_url))
    await one_by_one.open()
    try:
        for record in records:
            await one_by_one.save(record, live_after=0.0)
        want = await _rows(one_by_one)
        await one_by_one.delete([r.id for r in records])
        await one_by_one.save_many(rows_of(records, texts))
        got = await _rows(one_by_one)
    finally:
        await one_by_one.close()
    assert len(want[0]) == len(records) and len(want[1]) > len(records)
    card = agents.c.keys().index("card")
    [fifth] = [row for row in got[0] if row[0] == records[5].id]
    assert fifth[card] == json.loads(texts[records[5].id])  # the text, read back equal
    assert got == want
