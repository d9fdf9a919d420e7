"""Registry search at scale (SIMULATED fill): N generated agents, then real HTTP queries.

Run: ``source /tmp/pgenv; .venv/bin/python bench/registry_scale.py`` (1,000,000 agents on SQLite
and on PostgreSQL; ``--agents 10000 --stores sqlite --duration 2`` for a quick run).

1. SIMULATION: generates ``--agents`` realistic agents (brand-like names, 1–5 skills drawn with
   Zipf popularity from 3,135 skill ids, 1–3 tags per skill from 623, descriptions made of real
   words) and writes them straight into the registry's store (``AgentStore.save_many`` when the
   store has it; else, for the code before issue 14, one INSERT per 5,000 rows into its table).
   No card is fetched: this measures search, not registration (``bench/registry_search.py``
   registers through the API).
2. Starts the real registry (``serve_registry`` in its own process, uvicorn on 127.0.0.1 and an
   ephemeral port) on that store, on a temporary SQLite file or a fresh PostgreSQL database (from
   ``A2A_NODE_TEST_PG_URL``, dropped afterwards).
3. Measures ``GET /v1/agents`` p50/p99 per query kind with ``wrk -c1`` (each kind rotates 64
   distinct queries), then mixed-query throughput with ``wrk -c32`` rotating every kind; every
   answer is checked to be a 200 listing (``bench/wrk/registry_queries.lua``). Reports the
   registry's RSS (``/proc``) after start-up and after the queries, and its CPU time per request
   (user + system of the registry process only: SQLite runs inside it, PostgreSQL does not;
   for PostgreSQL "DB ms/req" adds the CPU of the server processes serving the bench's
   database, from ``pg_stat_activity`` and ``/proc``), against the targets of issue 14:
   p50 ≤ 20 ms for every kind and RSS ≤ 500 MB at 1M agents.

``--keep`` keeps the filled store and prints its ``--existing`` argument (a PostgreSQL URL or a
SQLite path); ``--existing`` measures such a store again without filling it, the registry's ttl
then covering the store's age so that its rows count as healthy, as right after the fill.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import random
import statistics
import sys
import tempfile
import time
from bisect import bisect
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from itertools import accumulate, zip_longest
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from operator import itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from uuid import uuid4

import asyncpg
import httpx
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from registry_search import free_port, run_wrk, start_registry, stop_registry, wait_ready  # noqa: E402

from node.registry import RegistrySettings  # noqa: E402
from node.registry.cards import parse_card  # noqa: E402
from node.registry.records import AgentRecord, Skill  # noqa: E402
from node.registry.schema import agents, name_key, term_rows, terms, words  # noqa: E402
from node.registry.store import AgentStore, Rows, rows_of  # noqa: E402


def _words(text: str) -> list[str]:
    return text.split()


VERBS = _words(
    """translate summarise extract classify rank search convert plan route parse tag
map detect forecast validate reconcile schedule monitor audit generate transcribe annotate
cluster deduplicate enrich geocode anonymise redact score recommend moderate caption segment
compare merge index crawl book quote estimate diagnose triage review draft negotiate price
optimise simulate backtest sign verify encrypt compress archive notify invoice track"""
)
OBJECTS = _words(
    """text pages invoices images tables emails logs code tickets events orders contracts
receipts shipments claims policies transactions payments portfolios prices quotes flights hotels
recipes menus leads contacts resumes candidates patients prescriptions symptoms lab-results
sensors alerts metrics traces incidents deployments pull-requests commits datasets spreadsheets
charts maps addresses routes videos podcasts transcripts articles reviews products listings
campaigns"""
)
DOMAINS = _words(
    """finance legal medical retail logistics travel insurance energy telecom education
media gaming security devops hr marketing sales support manufacturing agriculture construction
real-estate automotive aviation shipping banking accounting tax compliance procurement
research science chemistry biology climate weather government nonprofit hospitality food
fashion sports music film publishing advertising ecommerce crypto payments healthcare pharma
dental veterinary fitness wellness mobility robotics iot semiconductors cloud networking
storage databases analytics nlp vision speech translation search recommendation fraud risk
identity privacy gdpr hipaa pci audit mining oil gas water waste recycling utilities transit
parking events ticketing"""
)
QUALIFIERS = _words(
    """eu us uk apac latam fast batch realtime offline multilingual beta enterprise
open-source on-prem gpu low-latency"""
)
ADJECTIVES = _words(
    """reliable fast accurate secure private multilingual scalable lightweight
explainable automated incremental streaming robust friendly precise thorough adaptive modular
certified audited experimental trusted efficient compact detailed careful"""
)
AUDIENCES = _words(
    """teams analysts developers clinicians lawyers accountants recruiters travellers
merchants operators researchers students editors engineers auditors brokers dispatchers
planners"""
)
SOURCES = [
    "scanned documents", "PDF files", "web pages", "databases", "APIs", "spreadsheets",
    "chat messages", "mailboxes", "cloud storage", "sensor feeds", "call recordings",
    "support queues", "data lakes",
]  # fmt: skip
SYLLABLES = _words(
    """ve lo ra zen tri mix no va qua sol arc ly ton bri ka mi do fy lum en ori on
tek nex ax is cor al pi xo re da vi ta ner go su"""
)
ROLES = _words(
    """Assistant Agent Bot Parser Extractor Translator Planner Analyst Scout Router
Reviewer Auditor Scheduler Forecaster Monitor Copilot Concierge Clerk Broker Advisor"""
)
SKILL_IDS = [f"{v}-{o}" for v in VERBS for o in OBJECTS]
TAGS = DOMAINS + [f"{d}-{q}" for d in DOMAINS for q in QUALIFIERS[:6]]
NO_MATCH = "zqxjvkwy"


def _a(word: str) -> str:
    return f"{'An' if word[0] in 'aeiou' else 'A'} {word}"


_js = encode_basestring_ascii  # json.dumps of a str (ensure_ascii), without the call around it
_NON_WORD = str.maketrans("-.;,", "    ")  # the generator's only non-word characters in text
_agent_tuple = itemgetter(*(c.name for c in agents.columns))  # a row dict in column order
_term_tuple = itemgetter(*(c.name for c in terms.columns))


def _skill_json(s: Skill) -> str:
    tags = ", ".join(map(_js, s.tags))
    return (
        f'{{"id": {_js(s.id)}, "name": {_js(s.name)}, "description": {_js(s.description)}, '
        f'"tags": [{tags}]}}'
    )


def _zipf(n: int, s: float = 1.0) -> list[float]:
    """Cumulative Zipf weights over ``n`` ranks (for ``random.choices(cum_weights=...)``)."""
    return list(accumulate(1 / (rank**s) for rank in range(1, n + 1)))


class Population:
    """The vocabulary in a fixed, seeded popularity order, and a deterministic agent generator."""

    def __init__(self, seed: int = 1) -> None:
        rnd = random.Random(seed)
        self.skills = rnd.sample(SKILL_IDS, len(SKILL_IDS))  # popularity order
        self.tags = rnd.sample(TAGS, len(TAGS))
        self.skill_weights = _zipf(len(self.skills))
        self.tag_weights = _zipf(len(self.tags))
        self.brands = sorted(
            {"".join(rnd.sample(SYLLABLES, rnd.randint(2, 3))).title() for _ in range(4000)}
        )
        self.seed = seed
        self.counts: Counter[str] = Counter()  # "skill:x", "tag:x", "word:x" → agents
        self.count = False

    def _draw(self, i: int) -> tuple[str, str, str, str, list[Skill], str]:
        """Agent number ``i``'s brand, name, id, host, skills and description."""
        r = random.Random(self.seed * 1_000_003 + i).random  # random.choice() is 3x slower

        def pick(seq: list[str]) -> str:
            return seq[int(r() * len(seq))]

        def popular(seq: list[str], cum: list[float], k: int) -> list[str]:
            return sorted({seq[bisect(cum, r() * cum[-1])] for _ in range(k)})

        brand = pick(self.brands)
        name = f"{brand} {pick(OBJECTS).split('-')[0].title()} {pick(ROLES)}"
        agent_id = f"{name.lower().replace(' ', '-')}-{i:07d}"
        host = f"https://{brand.lower()}{i % 997}.agents.example.com"
        skills = []
        for skill_id in popular(self.skills, self.skill_weights, 1 + int(r() * 5)):
            verb, obj = skill_id.split("-", 1)
            action = f"{verb.title()} {obj.replace('-', ' ')}"
            description = (
                f"{action.replace(' ', 's ', 1)} from {pick(SOURCES)} for {pick(DOMAINS)} "
                f"{pick(AUDIENCES)}; {pick(ADJECTIVES)} and {pick(ADJECTIVES)}."
            )
            tags = popular(self.tags, self.tag_weights, 1 + int(r() * 3))
            skills.append(Skill(skill_id, action, description, tuple(tags)))
        description = (
            f"{_a(pick(ADJECTIVES))} {pick(DOMAINS)} agent by {brand} that helps "
            f"{pick(AUDIENCES)} {skills[0].name.lower()} and more."
        )
        return brand, name, agent_id, host, skills, description

    def agent(self, i: int, now: float) -> tuple[AgentRecord, dict[str, Any]]:
        """Agent number ``i``: its record as the store holds it, and its card."""
        brand, name, agent_id, host, skills, description = self._draw(i)
        card = {
            "name": name,
            "description": description,
            "version": f"1.{i % 7}.{i % 3}",
            "supportedInterfaces": [
                {"url": f"{host}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "provider": {"organization": brand, "url": host},
            "capabilities": {"streaming": i % 2 == 0},
            "defaultInputModes": ["text/plain", "application/json"],
            "defaultOutputModes": ["text/plain"],
            "skills": [s.to_json() for s in skills],
        }
        record = AgentRecord(
            id=agent_id,
            card_url=f"{host}/{agent_id}/agent-card.json",
            name=name,
            description=description,
            skills=tuple(skills),
            card=card,
            registered_at=now,
            last_seen=now,
        )
        if self.count:
            self._count(record, words(record))
        return record, card

    def rows(self, first: int, last: int, now: float) -> Rows:
        """Agents ``first`` to ``last`` as the store's rows, written out directly (no card
        dict, no ``json.dumps``): the same rows as ``rows_of`` of their :meth:`agent` records
        (``rev`` aside, random at every write), which a test checks."""
        out = Rows([], [], [], [])
        for i in range(first, last):
            brand, name, agent_id, host, skills, description = self._draw(i)
            card_url = f"{host}/{agent_id}/agent-card.json"
            record = AgentRecord(agent_id, card_url, name, description, tuple(skills), {}, now, now)
            skills_json = "[" + ", ".join(map(_skill_json, skills)) + "]"
            card = (
                f'{{"name": {_js(name)}, "description": {_js(description)}, '
                f'"version": "1.{i % 7}.{i % 3}", "supportedInterfaces": [{{"url": '
                f'{_js(host + "/a2a")}, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}}], '
                f'"provider": {{"organization": {_js(brand)}, "url": {_js(host)}}}, '
                f'"capabilities": {{"streaming": {"true" if i % 2 == 0 else "false"}}}, '
                '"defaultInputModes": ["text/plain", "application/json"], '
                f'"defaultOutputModes": ["text/plain"], "skills": {skills_json}}}'
            )
            parts = [name, description]
            for s in skills:
                parts += (s.id, s.name, s.description, *s.tags)
            text = " ".join(parts).casefold().translate(_NON_WORD)
            values = {
                "id": agent_id,
                "card_url": card_url,
                "name": name,
                "description": description,
                "skills": skills_json,
                "card": card,
                "registered_at": now,
                "last_seen": now,
                "card_etag": None,
                "rev": uuid4().hex,
                "name_key": name_key(name),
                "words": " ".join(dict.fromkeys(text.split())),
            }
            out.ids.append(agent_id)
            out.urls.append(card_url)
            out.agents.append(_agent_tuple(values))
            out.terms.extend(map(_term_tuple, term_rows(record)))
            if self.count:
                self._count(record, values["words"])
        return out

    def _count(self, record: AgentRecord, words: str) -> None:
        keys = {f"skill:{s.id}" for s in record.skills}
        keys |= {f"tag:{t}" for s in record.skills for t in s.tags}
        keys.update(["word:" + w for w in words.split()])  # each word once
        self.counts.update(keys)

    def queries(self, seed: int = 7, n: int = 64) -> dict[str, list[str]]:
        """``n`` distinct-ish paths per query kind, drawn as users would (popular terms more)."""
        rnd = random.Random(seed)

        def path(**params: str) -> str:
            return "/v1/agents?" + urlencode(params)

        def skill() -> str:
            return rnd.choices(self.skills, cum_weights=self.skill_weights)[0]

        def tag() -> str:
            return rnd.choices(self.tags, cum_weights=self.tag_weights)[0]

        words = [w for w in ADJECTIVES + AUDIENCES + DOMAINS if "-" not in w]
        return {
            "skill": [path(skill=skill()) for _ in range(n)],
            "tag": [path(tag=tag()) for _ in range(n)],
            "free text": [path(q=rnd.choice(words)) for _ in range(n)],
            "partial name": [
                path(q=rnd.choice(self.brands)[: rnd.randint(4, 6)].lower()) for _ in range(n)
            ],
            "free text, no match": [path(q="".join(rnd.sample(NO_MATCH, 6))) for _ in range(n)],
            "include_card": [path(tag=tag(), include_card="true") for _ in range(n)],
        }

    def matching(self, query_path: str) -> int | None:
        """Agents the generator counted for a query: exact for skill and tag; for ``q`` the
        agents holding the whole word, else the sum over the words it begins (an upper bound)."""
        params = dict(p.split("=", 1) for p in query_path.split("?", 1)[1].split("&"))
        for key in ("skill", "tag"):
            if key in params:
                return self.counts[f"{key}:{params[key]}"]
        q = params.get("q")
        if q is None:
            return None
        if (exact := self.counts.get(f"word:{q}")) is not None:
            return exact
        return sum(n for k, n in self.counts.items() if k.startswith(f"word:{q}"))


def check_generated(population: Population, sample: int = 50) -> None:
    """The records written directly are what registering their cards would store."""
    for i in range(sample):
        record, card = population.agent(i, 0.0)
        info = parse_card(card)
        assert (info.name, info.description, info.skills) == (
            record.name,
            record.description,
            record.skills,
        ), f"generated agent {i} differs from its parsed card"
    direct = population.rows(0, sample, 0.0)
    built = rows_of(population.agent(i, 0.0)[0] for i in range(sample))
    rev = [c.name for c in agents.columns].index("rev")
    assert (direct.ids, direct.urls, direct.terms) == (built.ids, built.urls, built.terms)
    for a, b in zip(direct.agents, built.agents, strict=True):
        assert a[:rev] + a[rev + 1 :] == b[:rev] + b[rev + 1 :], f"rows of {a[0]} differ"


_WORKER: Population | None = None


def _start_worker(seed: int) -> None:
    global _WORKER
    _WORKER = Population(seed)


def _worker_rows(first: int, last: int, now: float, count: bool) -> tuple[Rows, Counter[str]]:
    """In a worker process: the store's rows for agents ``first`` to ``last``, and the
    generator's counts for them when ``count``."""
    assert _WORKER is not None
    _WORKER.count = count
    _WORKER.counts.clear()
    return _WORKER.rows(first, last, now), _WORKER.counts


async def fill_store(
    db_url: str,
    population: Population,
    agents: int,
    *,
    chunk: int = 5000,
    last_seen: float | None = None,
    workers: int = 0,
) -> tuple[float, list[str]]:
    """SIMULATED fill: write ``agents`` generated records straight into the store (registered
    and last seen now, or at ``last_seen``); return the seconds it took and the ids.

    With a store that has ``bulk_load`` and ``workers`` > 0, worker processes build the rows
    (``rows_of``: what ``save`` writes) while this one writes them, and the secondary and text
    indexes are built once at the end (counted in the time)."""
    store = AgentStore(db_url)
    await store.open()
    ids: list[str] = []
    save_many = getattr(store, "save_many", None)
    bulk_load = getattr(store, "bulk_load", None)
    many_kwargs: dict[str, Any] = {}
    if save_many is not None:
        names = inspect.signature(save_many).parameters
        many_kwargs = {k: v for k, v in (("origin", "bench"), ("live_after", 0.0)) if k in names}
    start = time.perf_counter()
    now = time.time() if last_seen is None else last_seen
    try:
        if bulk_load is not None and workers > 0:
            async with bulk_load():
                ids = await _fill_parallel(save_many, population, agents, chunk, now, workers)
                print(f"  ... building the indexes ({time.perf_counter() - start:.0f} s)")
            return time.perf_counter() - start, ids
        for first in range(0, agents, chunk):
            records = [
                population.agent(i, now)[0] for i in range(first, min(agents, first + chunk))
            ]
            if save_many is not None:
                await save_many(records, **many_kwargs)
            else:
                await _insert_rows(store, records)
            ids += [r.id for r in records]
            if first and first % (chunk * 10) == 0:
                rate = first / (time.perf_counter() - start)
                print(f"  ... {first} agents written ({rate:.0f}/s)", flush=True)
    finally:
        await store.close()
    return time.perf_counter() - start, ids


async def _fill_parallel(
    save_many: Any, population: Population, agents: int, chunk: int, now: float, workers: int
) -> list[str]:
    """Rows built by ``workers`` processes, written here in order as they come."""
    loop = asyncio.get_running_loop()
    spans = [(f, min(agents, f + chunk)) for f in range(0, agents, chunk)]
    ahead = workers * 2
    ids: list[str] = []
    start = time.perf_counter()
    with ProcessPoolExecutor(
        workers, initializer=_start_worker, initargs=(population.seed,)
    ) as pool:

        def submit(n: int) -> asyncio.Future[Any]:
            first, last = spans[n]
            return loop.run_in_executor(pool, _worker_rows, first, last, now, population.count)

        pending = {n: submit(n) for n in range(min(ahead, len(spans)))}
        for n in range(len(spans)):
            rows, counts = await pending.pop(n)
            if n + ahead < len(spans):
                pending[n + ahead] = submit(n + ahead)
            population.counts.update(counts)
            await save_many(rows)
            ids += rows.ids
            if n and n % 20 == 0:
                rate = len(ids) / (time.perf_counter() - start)
                print(f"  ... {len(ids)} agents written ({rate:.0f}/s)", flush=True)
    return ids


async def _insert_rows(store: AgentStore, records: list[AgentRecord]) -> None:
    """For a store without ``save_many`` (before issue 14): one multi-row INSERT per chunk into
    its agents table, what ``save`` writes for a new id (no change-log rows: nobody follows)."""
    from node.registry.store import _to_row, agents  # the table's own row mapping

    async with store._eng().begin() as conn:
        await conn.execute(agents.insert(), [_to_row(r) for r in records])


@asynccontextmanager
async def fresh_database(
    base: str, prefix: str = "a2a_bench", *, keep: bool = False
) -> AsyncIterator[str]:
    """A new PostgreSQL database for this run (plain ``postgresql://`` URL), dropped after
    unless ``keep``."""
    name = f"{prefix}_{uuid4().hex[:10]}"
    admin = await asyncpg.connect(base)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield base.rsplit("/", 1)[0] + "/" + name
        finally:
            if not keep:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def store_url(kind: str, base_pg: str | None, *, keep: bool = False) -> AsyncIterator[str]:
    """A fresh, empty store of ``kind`` (``sqlite`` or ``postgresql``), removed afterwards
    unless ``keep`` (then measured again with ``--existing``)."""
    if kind == "sqlite":
        if keep:
            yield str(Path(tempfile.mkdtemp(prefix="a2a_bench_scale_")) / "registry.db")
            return
        with tempfile.TemporaryDirectory(prefix="a2a_bench_scale_") as tmp:
            yield str(Path(tmp) / "registry.db")
    else:
        if not base_pg:
            sys.exit("set A2A_NODE_TEST_PG_URL (source /tmp/pgenv) for PostgreSQL")
        async with fresh_database(base_pg, "a2a_bench_scale", keep=keep) as url:
            yield url


async def store_age(db_url: str) -> float:
    """Seconds since the store's oldest heartbeat (one index lookup, or one scan where
    ``last_seen`` has no index)."""
    store = AgentStore(db_url)
    await store.open()
    try:
        async with store._eng().connect() as conn:
            oldest = await conn.scalar(select(func.min(agents.c.last_seen)))
    finally:
        await store.close()
    return max(0.0, time.time() - float(oldest or time.time()))


@asynccontextmanager
async def existing(db: str) -> AsyncIterator[str]:
    yield db


def rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident set now and at its peak (VmRSS, VmHWM), in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class DatabaseCpu:
    """PostgreSQL: CPU seconds used by the server processes serving one database (the
    registry's pooled connections; this one's own excluded), read from ``/proc``."""

    def __init__(self, db: str | None) -> None:
        self.db = db
        self.conn: asyncpg.Connection | None = None

    async def __aenter__(self) -> DatabaseCpu:
        if self.db and self.db.startswith("postgresql"):
            self.conn = await asyncpg.connect(self.db)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def sample(self) -> dict[int, float] | None:
        if self.conn is None:
            return None
        pids = await self.conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        out = {}
        for (pid,) in pids:
            with suppress(OSError):  # gone meanwhile
                out[pid] = cpu_s(pid)
        return out

    @staticmethod
    def used(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
        if before is None or after is None:
            return None
        return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def interleave(lists: list[list[str]]) -> list[str]:
    return [p for group in zip_longest(*lists) for p in group if p is not None]


async def first_page_hits(url: str, paths: list[str]) -> tuple[float, float]:
    """Mean agents on the first page, and the fraction of queries with a next page."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        pages = [(await http.get(p)).raise_for_status().json() for p in paths[:16]]
    hits = statistics.mean(len(p["agents"]) for p in pages)
    return hits, sum(1 for p in pages if p.get("next_page_token")) / len(pages)


def uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def measure(kind: str, args: argparse.Namespace, population: Population) -> dict[str, Any]:
    out: dict[str, Any] = {"store": kind}
    pg = os.environ.get("A2A_NODE_TEST_PG_URL")
    store = existing(args.existing) if args.existing else store_url(kind, pg, keep=args.keep)
    async with store as db, AsyncExitStack() as stack:
        if args.existing:
            print(f"\n== {kind}: the existing store {db} (filled before; no counts)")
        else:
            print(f"\n== {kind}: SIMULATED fill of {args.agents} agents (load {uptime()})")
            if args.keep:
                print(f"kept after the run (--existing {db})")
            seconds, _ = await fill_store(
                RegistrySettings(db=db).db_url,
                population,
                args.agents,
                chunk=args.chunk,
                workers=args.workers,
            )
            out["fill_s"] = seconds
            print(f"wrote {args.agents} agents into the store in {seconds:.0f} s "
                  f"({args.agents / seconds:.0f}/s, load {uptime()})")  # fmt: skip
        ttl = 86_400.0
        if args.existing:  # a kept store: its rows were last seen at its fill, maybe days ago
            age = await store_age(RegistrySettings(db=db).db_url)
            ttl = max(ttl, age + 3_600)
            print(f"its oldest heartbeat is {age / 60:.0f} min old: ttl {ttl:.0f} s, so every "
                  "row counts as healthy as after the fill (no row is rewritten)")  # fmt: skip
        settings = RegistrySettings(
            port=free_port(), db=db, allow_cidrs=("127.0.0.0/8",), ttl_s=ttl
        )
        t0 = time.perf_counter()
        registry = start_registry(settings)
        try:
            await wait_ready(settings.base_url + "/healthz", timeout_s=args.ready_timeout)
            out["startup_s"] = time.perf_counter() - t0
            database = await stack.enter_async_context(DatabaseCpu(db))
            async with httpx.AsyncClient(base_url=settings.base_url, timeout=900) as http:
                held = (await http.get("/healthz")).json()["agents"]
                # the first listing sweeps and counts health over every row: not a search
                (await http.get("/v1/agents", params={"page_size": 1})).raise_for_status()
            out["rss_start"] = rss_mb(registry.pid)[0]
            print(f"registry ready in {out['startup_s']:.1f} s holding {held} agents, "
                  f"RSS {out['rss_start']:.0f} MB (load {uptime()})")  # fmt: skip
            print(f"\nsearch latency, wrk -t1 -c1, {args.duration} s per kind, page_size 50")
            print(f"{'query kind':<22}{'p50 ms':>8}{'p99 ms':>9}{'req/s':>7}{'CPU ms/req':>11}"
                  f"{'DB ms/req':>10}{'hits/page':>10}{'more':>6}"
                  f"{'matching (median)':>19}")  # fmt: skip
            kinds = population.queries()
            out["kinds"] = {}
            for name, paths in kinds.items():
                cpu, db_cpu = cpu_s(registry.pid), await database.sample()
                r = run_wrk(settings.base_url, paths, connections=1, duration=args.duration)
                r["cpu_ms"] = (cpu_s(registry.pid) - cpu) * 1000 / r["requests"]
                db_s = DatabaseCpu.used(db_cpu, await database.sample())
                r["db_cpu_ms"] = None if db_s is None else db_s * 1000 / r["requests"]
                db_ms = "-" if db_s is None else f"{r['db_cpu_ms']:.2f}"
                hits, more = await first_page_hits(settings.base_url, paths)
                counted = [m for p in paths if (m := population.matching(p)) is not None]
                median = f"{statistics.median(counted):.0f}" if counted else "-"
                out["kinds"][name] = r
                print(f"{name:<22}{r['p50']:>8.2f}{r['p99']:>9.2f}{r['rps']:>7.0f}{r['cpu_ms']:>11.2f}"
                      f"{db_ms:>10}{hits:>10.1f}{more:>6.0%}{median:>19}"
                      + (f"  socket errors: {r['errors']:.0f}" if r["errors"] else ""))  # fmt: skip
            cpu = cpu_s(registry.pid)
            mixed = run_wrk(
                settings.base_url,
                interleave(list(kinds.values())),
                connections=32,
                duration=args.duration * 2,
            )
            mixed["cpu_ms"] = (cpu_s(registry.pid) - cpu) * 1000 / mixed["requests"]
            out["mixed"] = mixed
            out["rss_end"], out["rss_peak"] = rss_mb(registry.pid)
            print(f"\nmixed queries (every kind in rotation), wrk -t1 -c32: {mixed['rps']:.0f} "
                  f"req/s, p50 {mixed['p50']:.1f} ms, p99 {mixed['p99']:.1f} ms, registry CPU "
                  f"{mixed['cpu_ms']:.2f} ms/req, socket errors {mixed['errors']:.0f}")  # fmt: skip
            print(f"registry RSS {out['rss_end']:.0f} MB after the queries, peak "
                  f"{out['rss_peak']:.0f} MB (load {uptime()})")  # fmt: skip
        finally:
            stop_registry(registry)
    worst = max(r["p50"] for r in out["kinds"].values())
    peak = out["rss_peak"]
    print(f"targets at {held} SIMULATED agents on {kind}: p50 <= 20 ms for every kind: "
          f"{'met' if worst <= 20 else 'MISSED'} (worst {worst:.1f} ms); RSS <= 500 MB: "
          f"{'met' if peak <= 500 else 'MISSED'} (peak {peak:.0f} MB)")  # fmt: skip
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1_000_000)
    parser.add_argument("--stores", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk -c1 run")
    parser.add_argument("--chunk", type=int, default=5000, help="records per store write")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes building rows (0: none)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the filled stores")
    parser.add_argument("--existing", help="measure this kept store (one kind in --stores)")
    parser.add_argument("--ready-timeout", type=float, default=1800, help="registry start-up")
    args = parser.parse_args()
    population = Population()
    check_generated(population)
    population.count = True
    for kind in args.stores.split(","):
        population.counts.clear()
        await measure(kind, args, population)


if __name__ == "__main__":
    asyncio.run(main())
