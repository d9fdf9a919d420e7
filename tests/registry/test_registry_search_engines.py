"""The same searches give the same pages on SQLite and PostgreSQL (the ``db`` fixture), and both
equal a plain-Python reading of the rules: filters, free text (every word of ``q`` begins a word
of the agent, or ``q`` is part of its name), health, eviction, (casefolded name, id) order and
cursors, whether the text is common (found by walking the order) or rare (found by the text
indexes); pages hold still while agents register, and
``include_card`` pages stop at a byte budget."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from node.registry import RegistrySettings
from node.registry import store as store_module
from node.registry.records import AgentRecord, Skill
from node.registry.search_sql import WINDOW
from node.registry.service import MAX_PAGE_BYTES
from node.registry.store import AgentStore, async_url
from tests.registry.conftest import FakeClock, MakeClient

NAMES = [
    "Zeta", "zeta", "Ångström", "straße", "STRASSE", "émile", "Émile", "日本語 agent", "a_b%c",
    'quote "q"', "Alpha", "alpha", "Beta", "beta two", "Gamma", "delta", "Ωmega", "x", "X", "Ab",
]  # fmt: skip
SKILLS = ["translate", "add", "forecast", "summarise", "search", "sql_query", "ß-skill"]
TAGS = ["text", "math", "weather", "data", "Text", "lang%", "日本"]
WORDS = ["does", "things", "quickly", "numbers", "language", "city", "long", "text", "Straße"]


def population(now: float, count: int = 240) -> list[AgentRecord]:
    rng = random.Random(14)
    out = []
    for i in range(count):
        skills = tuple(
            Skill(
                id=skill,
                name=skill.title(),
                description=" ".join(rng.sample(WORDS, 2)),
                tags=tuple(rng.sample(TAGS, rng.randint(0, 2))),
            )
            for skill in rng.sample(SKILLS, rng.randint(0, 3))
        )
        name = f"{rng.choice(NAMES)} {i % 7}" if i % 3 else rng.choice(NAMES)
        agent_id = f"agent-{i:03d}"
        out.append(
            AgentRecord(
                id=agent_id,
                card_url=f"http://127.0.0.1:9/{agent_id}.json",
                name=name,
                description=" ".join(rng.sample(WORDS, 3)),
                skills=skills,
                card={"name": name, "pad": "p" * rng.randint(0, 50)},
                registered_at=now - 200,
                last_seen=now - rng.choice([0, 5, 29, 31, 60, 89, 91, 150]),
            )
        )
    return out


def expected(records: list[AgentRecord], now: float, **params: str) -> list[str]:
    """The ids a search must return, by the rules as plain Python (ttl 30 s, evict 90 s)."""

    def fields(r: AgentRecord) -> Iterator[str]:
        yield from (r.name, r.description)
        for s in r.skills:
            yield from (s.id, s.name, s.description, *s.tags)

    def matches(r: AgentRecord) -> bool:
        if now - r.last_seen > 90:
            return False
        if "skill" in params and params["skill"] not in {s.id for s in r.skills}:
            return False
        if "tag" in params and params["tag"] not in {t for s in r.skills for t in s.tags}:
            return False
        if "healthy" in params and (now - r.last_seen <= 30) != (params["healthy"] == "true"):
            return False
        q = params.get("q")
        if q is None:
            return True
        words = re.findall(r"\w+", " ".join(fields(r)).casefold())
        wanted = re.findall(r"\w+", q.casefold())
        if wanted and all(any(w.startswith(x) for w in words) for x in wanted):
            return True  # every word of q begins a word of the agent
        return len(q) >= 3 and q.casefold() in r.name.casefold()  # part of the name

    found = sorted((r for r in records if matches(r)), key=lambda r: (r.name.casefold(), r.id))
    return [r.id for r in found]


QUERIES: list[dict[str, str]] = [
    {},
    {"skill": "add"},
    {"skill": "ß-skill"},
    {"skill": "ADD"},
    {"tag": "text"},
    {"tag": "Text"},
    {"tag": "lang%"},
    {"skill": "translate", "tag": "math"},
    {"q": "zeta"},
    {"q": "ZETA 3"},
    {"q": "ß"},
    {"q": "strasse"},
    {"q": "STRASSE"},
    {"q": "é"},
    {"q": "émi"},
    {"q": "日本"},
    {"q": "%"},
    {"q": "_"},
    {"q": "a_b"},
    {"q": '"q"'},
    {"q": "a"},
    {"q": "ab"},
    {"q": "does things"},
    {"q": "sql_query"},
    {"q": "no such text"},
    {"q": "quick", "skill": "add"},
    {"q": "text", "tag": "data", "healthy": "true"},
    {"healthy": "true"},
    {"healthy": "false"},
    {"healthy": "false", "skill": "search"},
]


UP = 90.0  # a registry evicts nobody in its first evict_after (90 s): it has been up that long


async def fill(db: str, records: list[AgentRecord]) -> None:
    store = AgentStore(async_url(RegistrySettings(db=db).db_url))
    await store.open()
    try:
        await store.save_many(records)
    finally:
        await store.close()


async def walk(client: httpx.AsyncClient, page_size: int, **params: Any) -> list[dict[str, Any]]:
    """Every entry of a search, page by page."""
    out: list[dict[str, Any]] = []
    query: dict[str, Any] = {"page_size": page_size, **params}
    for _ in range(500):
        response = await client.get("/v1/agents", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        out += body["agents"]
        if not body["next_page_token"]:
            return out
        query["page_token"] = body["next_page_token"]
    raise AssertionError("the listing never ended")


@pytest.fixture
async def filled(
    make_client: MakeClient, db: str, clock: FakeClock
) -> AsyncIterator[tuple[httpx.AsyncClient, list[AgentRecord]]]:
    records = population(clock.now + UP)
    async with make_client(db=db):
        pass  # creates the schema
    await fill(db, records)
    async with make_client(db=db) as client:
        clock.advance(UP)
        yield client, records


@pytest.mark.parametrize("window", [WINDOW, 16])  # 16: text pages found past the window too
async def test_every_search_follows_the_rules_on_both_engines(
    filled, clock, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "WINDOW", window)
    client, records = filled
    assert len(expected(records, clock.now)) > 150  # some evicted, most not
    for params in QUERIES:
        want = expected(records, clock.now, **params)
        got = [a["id"] for a in await walk(client, 200, **params)]
        assert got == want, params
        paged = [a["id"] for a in await walk(client, 7, **params)]
        assert paged == want, params


async def test_pages_hold_still_while_agents_register(make_client, db, clock) -> None:
    records = population(clock.now + UP, 60)
    async with make_client(db=db):
        pass
    await fill(db, records)
    want = expected(records, clock.now + UP)
    seen: list[str] = []
    query: dict[str, Any] = {"page_size": 6}
    async with make_client(db=db) as client:
        clock.advance(UP)
        for round_ in range(100):
            body = (await client.get("/v1/agents", params=query)).json()
            seen += [a["id"] for a in body["agents"]]
            # agents arrive on both sides of the cursor between pages
            await fill(db, [new_agent(f"new-{round_}-{n}", name, clock.now) for n, name in
                            enumerate(("0 first", "Mid", "zzz last"))])  # fmt: skip
            if not body["next_page_token"]:
                break
            query["page_token"] = body["next_page_token"]
    old = [i for i in seen if not i.startswith("new-")]
    assert old == want  # every agent there from the start, once, in order
    assert len(seen) == len(set(seen))


def new_agent(agent_id: str, name: str, now: float) -> AgentRecord:
    return AgentRecord(
        agent_id, f"http://127.0.0.1:9/{agent_id}.json", name, "", (), {"n": 1}, now, now
    )


async def test_include_card_pages_stop_at_the_byte_budget(make_client, db, clock) -> None:
    big = MAX_PAGE_BYTES // 3 + 1000  # three cards pass the budget
    records = [
        AgentRecord(
            f"big-{i}",
            f"http://127.0.0.1:9/big-{i}.json",
            f"Big {i}",
            "",
            (),
            {"name": f"Big {i}", "pad": str(i) * big},
            clock.now,
            clock.now,
        )
        for i in range(7)
    ]
    async with make_client(db=db):
        pass
    await fill(db, records)
    async with make_client(db=db) as client:
        pages: list[list[dict[str, Any]]] = []
        query: dict[str, Any] = {"page_size": 50, "include_card": "true"}
        while True:
            response = await client.get("/v1/agents", params=query)
            body = response.json()
            pages.append(body["agents"])
            assert len(response.content) < MAX_PAGE_BYTES + 10_000
            if not body["next_page_token"]:
                break
            query["page_token"] = body["next_page_token"]
        assert [len(p) for p in pages] == [2, 2, 2, 1]
        assert [a["card"]["name"] for p in pages for a in p] == [f"Big {i}" for i in range(7)]
        small = (await client.get("/v1/agents", params={"page_size": 50})).json()
        assert len(small["agents"]) == 7  # without cards, no byte budget applies
