"""The registry's database, through SQLAlchemy async core: every read and search goes here.

SQLite (a file, WAL mode) by default; any async URL works, e.g. ``postgresql+asyncpg://...``.
The tables and their indexes are in :mod:`node.registry.schema`; searches are built by
:mod:`node.registry.search_sql`. Registrations and deletions are committed before the API
answers; heartbeats arrive in batches (:meth:`AgentStore.beat`, one statement per batch); the
eviction sweep is one ``DELETE`` under an advisory lock (one replica at a time on PostgreSQL).
Nothing about agents is kept in memory here, so replicas on one database always agree on what
has been written.

Reading never trusts a row: every column is read as raw text (bytes on SQLite, whose columns can
hold anything) and decoded here, one row at a time, so a row that cannot be decoded is reported
(:class:`BadRow`) instead of failing the read. JSON is written without ``NaN``/``Infinity``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from secrets import token_hex
from typing import Any
from uuid import uuid4

from sqlalchemy import (
    JSON,
    Column,
    Float,
    LargeBinary,
    cast,
    delete,
    event,
    func,
    inspect,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType, Text

from node.errors import RegistryError
from node.registry import name_order, safejson, search_table
from node.registry.records import AgentRecord, Skill
from node.registry.schema import (
    ADDED_COLUMNS,
    INDEXES,
    PG_FILLFACTOR,
    PG_HOT_DDL,
    PG_TRIGRAM_EXTENSION,
    SQLITE_DDL,
    agents,
    metadata,
    name_key,
    term_rows,
    term_values,
    terms,
    words,
)
from node.registry.search_sql import WINDOW, Filter, Key, page_statement

log = logging.getLogger(__name__)

WRITE_LOCK = 0x5245_4743  # advisory lock key: registrations and deletions (PostgreSQL)
SWEEP_LOCK = 0x5245_4753  # advisory lock key: one sweeper at a time (PostgreSQL)
CHUNK = 500  # ids per IN (...) list
DECODED_ROWS = 10_000  # rows searches keep decoded (a few kB each)

_BEAT_SQL = {
    "postgresql": (  # only the ids whose row is gone, rewritten or not served come back
        "WITH b AS (SELECT * FROM unnest(CAST(:ids AS TEXT[]), "
        "CAST(:ts AS DOUBLE PRECISION[]), CAST(:revs AS TEXT[])) AS b(id, ts, rev)), "
        "u AS (UPDATE registry_agents AS a SET last_seen = GREATEST(a.last_seen, b.ts) FROM b "
        "WHERE a.id = b.id RETURNING a.id, a.rev, a.name_key IS NOT NULL AS served) "
        "SELECT b.id FROM b LEFT JOIN u ON u.id = b.id WHERE b.rev IS NOT NULL "
        "AND (u.id IS NULL OR u.rev IS DISTINCT FROM b.rev OR NOT u.served)"
    ),
    "sqlite": (
        "UPDATE registry_agents SET last_seen = max(registry_agents.last_seen, b.ts) "
        "FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS ts "
        "FROM json_each(:beats)) AS b WHERE registry_agents.id = b.id "
        # the key itself: SQLite 3.40 answers ``name_key IS NOT NULL`` wrongly in RETURNING
        "RETURNING registry_agents.id, registry_agents.rev, registry_agents.name_key"
    ),
}
_HELD_SQL = (
    "SELECT id FROM registry_agents WHERE id = ANY(CAST(:ids AS TEXT[])) "
    "UNION SELECT id FROM registry_agents WHERE card_url = ANY(CAST(:urls AS TEXT[]))"
)
"""The rows a bulk write replaces (PostgreSQL: one statement, whatever the batch's size)."""
_LIGHT = [c for c in agents.columns if c.name not in ("card", "words")]
"""What a listing, a heartbeat or a search reads of a row: everything but the card."""


@dataclass(frozen=True, slots=True)
class BadRow:
    """A stored row that could not be decoded into an :class:`AgentRecord`."""

    id: str  # the row's id as well as it can be read
    reason: str


@dataclass(frozen=True, slots=True)
class Stored:
    """A row as read: the record (its ``card`` is ``{}`` unless read with the card), the row's
    revision (``rev``: changes at every write) and whether it is served (indexed)."""

    record: AgentRecord
    rev: str
    served: bool


@dataclass(frozen=True, slots=True)
class Card:
    """A stored card, decoded, with the size of its JSON text (for byte-bounded pages)."""

    document: dict[str, Any]
    size: int


def async_url(url: str) -> str:
    """``postgresql://`` / ``postgres://`` → ``postgresql+asyncpg://`` (the driver we ship)."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        return f"postgresql+asyncpg://{rest}"
    return url


class HeldElsewhere(Exception):
    """The agent id is held by another card URL (raised by :meth:`AgentStore.save`)."""

    def __init__(self, card_url: str) -> None:
        super().__init__(card_url)
        self.card_url = card_url


class AgentStore:
    """Reads, searches and writes agent rows. Open before use, close when done."""

    def __init__(self, url: str) -> None:
        self._url = make_url(async_url(url))
        self._engine: AsyncEngine | None = None
        self.write_transactions = 0
        """Write transactions committed or attempted by this process (for tests and benches)."""
        self.trigram = True
        """Whether free text is served by a trigram index (PostgreSQL without the ``pg_trgm``
        extension, which this user could not create, scans instead)."""
        self._bulk = False  # inside bulk_load: FTS entries and secondary indexes come at the end
        self._decoded: OrderedDict[tuple[Any, Any], Stored] = OrderedDict()
        """Rows searches decoded, by raw (id, rev): only heartbeats change a row and keep its
        rev, so a row seen again decodes its ``last_seen`` and ``name_key`` only (LRU)."""
        self._column_sets: dict[bool, list[ColumnElement[Any]]] = {}

    @property
    def dialect(self) -> str:
        return self._eng().dialect.name

    async def open(self) -> None:
        if self._url.get_backend_name() == "sqlite" and self._url.database not in (
            None,
            "",
            ":memory:",
        ):
            await asyncio.to_thread(
                Path(self._url.database).parent.mkdir, parents=True, exist_ok=True
            )
        engine = create_async_engine(self._url, json_serializer=_dumps)
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        self._engine = engine
        if engine.dialect.name not in _BEAT_SQL:
            raise RegistryError(
                f"the registry runs on SQLite or PostgreSQL, not {engine.dialect.name}"
            )
        async with _translated("create the schema"), engine.begin() as conn:
            if engine.dialect.name == "postgresql":  # replicas starting together
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})"))
            await conn.run_sync(metadata.create_all)
            await conn.run_sync(_add_columns)  # a table from an older version
            await self._build_indexes(conn)

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    # -- reads --------------------------------------------------------------------------------

    async def get(
        self, agent_ids: Iterable[str], *, with_card: bool = False
    ) -> dict[str, Stored | BadRow]:
        """The stored rows of ``agent_ids`` (absent ids are left out)."""
        ids = list(dict.fromkeys(agent_ids))
        columns = self._columns(with_card)
        out: dict[str, Stored | BadRow] = {}
        async with _translated("read agents"), self._eng().connect() as conn:
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                rows = await conn.execute(select(*columns).where(agents.c.id.in_(chunk)))
                for row in rows:
                    found = _decode(row._asdict())
                    out[found.id if isinstance(found, BadRow) else found.record.id] = found
        return out

    async def by_card_url(self, card_urls: Iterable[str]) -> dict[str, Stored]:
        """The rows (without cards) registered from ``card_urls``, by card URL; rows that do not
        decode are left out (conditional re-registration: their stored ``card_etag``)."""
        urls = list(dict.fromkeys(card_urls))
        columns = self._columns(False)
        out: dict[str, Stored] = {}
        async with _translated("read agents"), self._eng().connect() as conn:
            for start in range(0, len(urls), CHUNK):
                chunk = urls[start : start + CHUNK]
                rows = await conn.execute(select(*columns).where(agents.c.card_url.in_(chunk)))
                for row in rows:
                    if isinstance(found := _decode(row._asdict()), Stored):
                        out[found.record.card_url] = found
        return out

    async def cards(self, agent_ids: Iterable[str]) -> dict[str, tuple[str, Card | BadRow]]:
        """The cards of ``agent_ids`` with their rows' revisions (absent ids are left out)."""
        ids = list(dict.fromkeys(agent_ids))
        card, rev = self._raw(agents.c.card), self._raw(agents.c.rev)
        out: dict[str, tuple[str, Card | BadRow]] = {}
        async with _translated("read cards"), self._eng().connect() as conn:
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                rows = await conn.execute(
                    select(agents.c.id, rev, card).where(agents.c.id.in_(chunk))
                )
                for agent_id, raw_rev, raw_card in rows:
                    values = {"card": raw_card, "rev": raw_rev}
                    try:
                        document = _json(values, "card")
                        if not isinstance(document, dict):
                            raise _Undecodable("column card is not an object")
                        out[agent_id] = (_text(values, "rev"), Card(document, len(raw_card)))
                    except _Undecodable as exc:
                        out[agent_id] = ("", BadRow(agent_id, str(exc)))
        return out

    async def search(self, f: Filter) -> list[tuple[Key, Stored | BadRow]]:
        """One page of served rows (without cards) in page order, each with its cursor key."""
        engine = self._eng()
        columns, dialect = self._columns(False), engine.dialect.name
        async with _translated("search agents"), engine.connect() as conn:
            rows: Sequence[Any] = []
            if f.windowed:  # a common text fills its page within the next rows in order
                rows = (
                    await conn.execute(*page_statement(f, columns, dialect, window=WINDOW))
                ).all()
            if len(rows) < f.limit:
                rows = (await conn.execute(*page_statement(f, columns, dialect))).all()
        out: list[tuple[Key, Stored | BadRow]] = []
        decoded = self._decoded
        for row in rows:
            values = row._asdict()
            key = values.pop("page_key")
            seen = (values["id"], values["rev"])  # raw: a row's columns change only with rev
            hit = decoded.get(seen) if seen[1] is not None else None
            if hit is None:
                found = _decode(values)
                if isinstance(found, Stored) and seen[1] is not None:
                    decoded[seen] = found
                    if len(decoded) > DECODED_ROWS:
                        decoded.popitem(last=False)
            else:
                decoded.move_to_end(seen)
                found = _seen_again(hit, values)
            out.append(
                ((_id_of(key), found.id if isinstance(found, BadRow) else found.record.id), found)
            )
        return out

    async def counts(self) -> tuple[int, int]:
        """How many rows are served, and how many are not (unreadable or not yet checked)."""
        served = func.count().filter(agents.c.name_key.is_not(None))
        unserved = func.count().filter(agents.c.name_key.is_(None))
        async with _translated("count agents"), self._eng().connect() as conn:
            row = (await conn.execute(select(served, unserved))).one()
        return int(row[0]), int(row[1])

    async def health_counts(self, healthy_after: float, seen_after: float) -> tuple[int, int]:
        """How many served rows are healthy and unhealthy (rows last seen before ``seen_after``,
        evicted, are left out)."""
        healthy = func.count().filter(agents.c.last_seen >= healthy_after)
        unhealthy = func.count().filter(agents.c.last_seen < healthy_after)
        async with _translated("count agents"), self._eng().connect() as conn:
            row = (
                await conn.execute(
                    select(healthy, unhealthy).where(
                        agents.c.name_key.is_not(None), agents.c.last_seen >= seen_after
                    )
                )
            ).one()
        return int(row[0]), int(row[1])

    async def unserved_count(self) -> int:
        async with _translated("count agents"), self._eng().connect() as conn:
            found = await conn.scalar(
                select(func.count()).select_from(agents).where(agents.c.name_key.is_(None))
            )
        return int(found or 0)

    # -- writes -------------------------------------------------------------------------------

    async def save(self, record: AgentRecord, *, live_after: float) -> tuple[AgentRecord, bool]:
        """Insert ``record``, replacing any row with the same id or card URL (one transaction,
        under the write lock). A served row for the same card URL with a heartbeat after
        ``live_after`` keeps its ``registered_at``; returns the record stored and whether it
        is new. Raises :class:`HeldElsewhere` when another card URL holds the id that recently.
        """
        async with self._writing("save an agent") as conn:
            rows = await conn.execute(
                select(
                    agents.c.id,
                    agents.c.card_url,
                    agents.c.last_seen,
                    agents.c.registered_at,
                    agents.c.name_key,
                ).where((agents.c.id == record.id) | (agents.c.card_url == record.card_url))
            )
            replaced, previous = [], None
            for agent_id, card_url, last_seen, registered_at, key in rows:
                live = last_seen > live_after
                if agent_id == record.id and card_url != record.card_url and live:
                    raise HeldElsewhere(card_url)
                if card_url == record.card_url and live and key is not None:
                    previous = registered_at
                replaced.append(agent_id)
            if previous is not None:
                record = replace(record, registered_at=previous)
            if replaced:
                await self._delete(conn, agents.c.id.in_(replaced))
            await self._insert(conn, [record])
        return record, previous is None

    async def save_many(self, records: Sequence[AgentRecord] | Rows) -> None:
        """Insert ``records`` in one transaction (batched statements), replacing the rows with
        the same ids or card URLs: the bulk path (imports, simulations). Unlike :meth:`save`,
        nothing is checked against live rows and ``registered_at`` is taken as given. The rows
        may come already built (:func:`rows_of`, e.g. in worker processes)."""
        rows = records if isinstance(records, Rows) else rows_of(records)
        if not rows.ids:
            return
        async with self._writing("save agents") as conn, self._big_cache(conn):
            ids, urls = rows.ids, rows.urls
            replaced: set[str] = set()  # read first: deleting is dear, and mostly finds nothing
            if self.dialect == "postgresql":
                found = await conn.execute(text(_HELD_SQL), {"ids": ids, "urls": urls})
                replaced.update(found.scalars())
            for key, values in ((agents.c.id, ids), (agents.c.card_url, urls)):
                for start in range(0, len(values) * (self.dialect == "sqlite"), CHUNK):
                    where = key.in_(values[start : start + CHUNK])  # one index each, not an OR
                    replaced.update((await conn.scalars(select(agents.c.id).where(where))).all())
            old = sorted(replaced)
            for start in range(0, len(old), CHUNK):
                await self._delete(conn, agents.c.id.in_(old[start : start + CHUNK]))
            await self._insert_bulk(conn, rows)

    @asynccontextmanager
    async def bulk_load(self) -> AsyncIterator[None]:
        """Fill an EMPTY store fast (simulations, a first import): inside, :meth:`save_many`
        writes rows and terms only; the secondary indexes (and SQLite's FTS entries) are
        dropped first and built once at the end, sorted, instead of row by row. Nothing may
        search this store meanwhile; raises :class:`RegistryError` when it holds rows."""
        engine = self._eng()
        async with _translated("prepare a bulk load"), engine.begin() as conn:
            if await conn.scalar(select(agents.c.id).limit(1)) is not None:
                raise RegistryError("a bulk load needs an empty registry store")
            for name in _deferred_indexes(engine.dialect.name):
                await conn.execute(text(f"DROP INDEX IF EXISTS {name}"))
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            async with _translated("finish a bulk load"), engine.begin() as conn:
                await self._build_indexes(conn, fill_fts=True)
                if self.dialect == "postgresql":  # statistics for the new expression indexes
                    await conn.execute(text("ANALYZE registry_agents, registry_terms"))

    async def _build_indexes(self, conn: AsyncConnection, *, fill_fts: bool = False) -> None:
        """Create every secondary index (those that exist are left alone); with ``fill_fts``
        (after a bulk load into an empty store, so every row is served) fill SQLite's FTS
        tables from the rows."""
        if self.dialect == "postgresql":
            await conn.execute(text("SET LOCAL maintenance_work_mem = '256MB'"))
        for index in INDEXES:
            await conn.run_sync(index.create, checkfirst=True)
        if self.dialect == "sqlite":
            for statement in SQLITE_DDL:
                await conn.execute(text(statement))
            await name_order.build(conn, refill=fill_fts)
        else:
            await _hot_heartbeats(conn)
            self.trigram = await _trigram_index(conn)
            await search_table.build(conn, refill=fill_fts, trigram=self.trigram)

    async def index(self, record: AgentRecord) -> None:
        """Serve a row found servable (one not written by the registry, or set aside before)."""
        async with self._writing("index an agent") as conn:
            mine = agents.c.id == record.id
            await self._unindex(conn, mine)
            await conn.execute(delete(terms).where(terms.c.agent_id == record.id))
            await conn.execute(
                update(agents)
                .where(mine)
                .values(rev=uuid4().hex, name_key=name_key(record.name), words=words(record))
            )
            if rows := term_rows(record):
                await conn.execute(terms.insert(), rows)
            await self._reindex(conn, [record.id])

    async def set_aside(self, agent_id: str) -> None:
        """Stop serving the row (it stays, counted as unreadable, until replaced or deleted)."""
        async with self._writing("set an agent aside") as conn:
            mine = agents.c.id == agent_id
            await self._unindex(conn, mine)
            await conn.execute(delete(terms).where(terms.c.agent_id == agent_id))
            await conn.execute(update(agents).where(mine).values(name_key=None, words=None))

    async def check_unserved(self, reason: Callable[[AgentRecord], str | None]) -> int:
        """Index every unserved row that decodes and for which ``reason`` gives ``None`` (rows
        written by an older version or behind the registry's back); return how many remain
        unserved. Cheap when there are none: one index lookup."""
        left = 0
        after = ""
        columns = self._columns(True)
        while True:
            async with _translated("check agents"), self._eng().connect() as conn:
                rows = (
                    await conn.execute(
                        select(*columns, agents.c.id.label("raw_id"))
                        .where(agents.c.name_key.is_(None), agents.c.id > after)
                        .order_by(agents.c.id)
                        .limit(CHUNK)
                    )
                ).all()
            if not rows:
                return left
            for row in rows:
                values = row._asdict()
                after = values.pop("raw_id")
                found = _decode(values)
                if isinstance(found, BadRow) or reason(found.record) is not None:
                    left += 1
                else:
                    await self.index(found.record)

    async def beat(self, beats: dict[str, float], revs: dict[str, str] | None = None) -> set[str]:
        """Record heartbeats (id → time) in ONE statement; a row never moves back in time.
        ``revs`` holds the revision the caller expects for some ids: returns those of them
        whose row is gone, has another revision or is not served (computed by PostgreSQL, so
        the usual answer is no row at all)."""
        if not beats:
            return set()
        revs = revs or {}
        engine = self._eng()
        postgres = engine.dialect.name == "postgresql"
        if postgres:
            ids = list(beats)
            params: dict[str, Any] = {
                "ids": ids,
                "ts": list(beats.values()),
                "revs": [revs.get(i) for i in ids],
            }
        else:
            params = {"beats": json.dumps(list(beats.items()))}
        async with _translated("record heartbeats"), engine.begin() as conn:
            self.write_transactions += 1
            rows = (await conn.execute(text(_BEAT_SQL[engine.dialect.name]), params)).all()
        if postgres:
            return {_id_of(row[0]) for row in rows}
        found = {_id_of(i): (rev, key is not None) for i, rev, key in rows}
        return {i for i, rev in revs.items() if found.get(i, ("", False)) != (rev, True)}

    async def delete(self, agent_ids: Iterable[str]) -> None:
        ids = list(agent_ids)
        if not ids:
            return
        async with self._writing("delete agents") as conn:
            for start in range(0, len(ids), CHUNK):
                await self._delete(conn, agents.c.id.in_(ids[start : start + CHUNK]))

    async def sweep(self, cutoff: float) -> int | None:
        """Delete every row last seen before ``cutoff`` in ONE statement (their terms follow by
        cascade; on SQLite one more takes them out of the FTS tables first); return how many,
        or ``None`` when another replica is sweeping."""
        engine = self._eng()
        async with _translated("sweep agents"), engine.begin() as conn:
            self.write_transactions += 1
            if engine.dialect.name == "postgresql" and not await conn.scalar(
                text(f"SELECT pg_try_advisory_xact_lock({SWEEP_LOCK})")
            ):
                return None
            return await self._delete(conn, agents.c.last_seen < cutoff)

    # -- helpers ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _writing(self, what: str) -> AsyncIterator[AsyncConnection]:
        """A write transaction holding the write lock (PostgreSQL)."""
        engine = self._eng()
        async with _translated(what), engine.begin() as conn:
            self.write_transactions += 1
            if engine.dialect.name == "postgresql":
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})"))
            yield conn

    @asynccontextmanager
    async def _big_cache(self, conn: AsyncConnection) -> AsyncIterator[None]:
        """SQLite: a larger page cache for one bulk write, given back after (a pooled
        connection keeps what its cache holds)."""
        if self.dialect != "sqlite":
            yield
            return
        await conn.exec_driver_sql(f"PRAGMA cache_size={_WRITE_CACHE}")
        try:
            yield
        finally:
            await conn.exec_driver_sql(f"PRAGMA cache_size={_READ_CACHE}")

    async def _insert(self, conn: AsyncConnection, records: Sequence[AgentRecord]) -> None:
        await conn.execute(agents.insert(), [_to_row(r) for r in records])
        rows = [t for r in records for t in term_rows(r)]
        if rows:
            await conn.execute(terms.insert(), rows)
        await self._reindex(conn, [r.id for r in records])

    async def _insert_bulk(self, conn: AsyncConnection, rows: Rows) -> None:
        """:meth:`_insert` straight through the driver: ``COPY`` on PostgreSQL, one
        ``executemany`` on SQLite, in the transaction ``conn`` holds (already begun: the bulk
        path deletes first)."""
        driver: Any = (await conn.get_raw_connection()).driver_connection
        if self.dialect == "postgresql":
            await driver.copy_records_to_table(agents.name, records=rows.agents, columns=_COLUMNS)
            await driver.copy_records_to_table(
                terms.name, records=rows.terms, columns=_TERM_COLUMNS
            )
        else:
            await driver.executemany(_INSERT_SQL[0], rows.agents)
            await driver.executemany(_INSERT_SQL[1], rows.terms)
        if not self._bulk:
            await self._reindex(conn, rows.ids)

    async def _delete(self, conn: AsyncConnection, where: ColumnElement[bool]) -> int:
        """Delete the rows ``where`` says (their terms by cascade, FTS entries first)."""
        await self._unindex(conn, where, deleting=True)
        return int((await conn.execute(delete(agents).where(where))).rowcount or 0)

    async def _reindex(self, conn: AsyncConnection, ids: list[str]) -> None:
        """Add the served rows of ``ids`` to SQLite's FTS tables (PostgreSQL: to
        :mod:`~node.registry.search_table`)."""
        if self.dialect != "sqlite":
            await search_table.add(conn, ids)
            return
        await name_order.add(conn, ids)

    async def _unindex(
        self, conn: AsyncConnection, where: ColumnElement[bool], *, deleting: bool = False
    ) -> None:
        """Take the served rows ``where`` says out of SQLite's FTS tables (one statement each,
        with the values they were indexed with, as external-content tables need); PostgreSQL:
        out of :mod:`~node.registry.search_table`, unless ``deleting`` (the cascade does it)."""
        if self._bulk:  # in a bulk load the FTS tables come last
            return
        if self.dialect != "sqlite":
            if not deleting:
                await search_table.remove(conn, where)
            return
        await name_order.remove(conn, where)

    def _columns(self, with_card: bool) -> list[ColumnElement[Any]]:
        if (found := self._column_sets.get(with_card)) is None:
            chosen = [*_LIGHT, agents.c.card] if with_card else _LIGHT
            found = self._column_sets[with_card] = [self._raw(c) for c in chosen]
        return found

    def _raw(self, column: Column[Any]) -> ColumnElement[Any]:
        return _raw(column, self._eng().dialect.name)

    def _eng(self) -> AsyncEngine:
        if self._engine is None:
            raise RegistryError("the registry store is not open")
        return self._engine


def _add_columns(sync_conn: Any) -> None:
    """Add the columns of :data:`ADDED_COLUMNS` a table made by an older version lacks (its rows
    are then unserved until :meth:`AgentStore.check_unserved` indexes them)."""
    have = {c["name"] for c in inspect(sync_conn).get_columns("registry_agents")}
    for name in ADDED_COLUMNS:
        if name not in have:
            kind = agents.c[name].type.compile(dialect=sync_conn.dialect)
            sync_conn.execute(text(f"ALTER TABLE registry_agents ADD COLUMN {name} {kind}"))


async def _hot_heartbeats(conn: AsyncConnection) -> None:
    """Run :data:`PG_HOT_DDL` where the table is not so yet (the ``ALTER`` takes a lock)."""
    options = await conn.scalar(
        text("SELECT reloptions FROM pg_class WHERE oid = 'registry_agents'::regclass")
    )
    done = f"fillfactor={PG_FILLFACTOR}" in (options or [])
    for statement in PG_HOT_DDL[:1] if done else PG_HOT_DDL:
        await conn.execute(text(statement))


async def _trigram_index(conn: AsyncConnection) -> bool:
    """Create ``pg_trgm``; ``False`` (logged) when not allowed."""
    try:
        async with conn.begin_nested():
            await conn.execute(text(PG_TRIGRAM_EXTENSION))
    except DBAPIError as exc:
        log.warning(
            "registry: cannot create the pg_trgm extension (%s); a search for part of a name "
            "scans the names instead of using a trigram index. An administrator can run: %s",
            str(exc.orig)[:200],
            PG_TRIGRAM_EXTENSION,
        )
        return False
    return True


@asynccontextmanager
async def _translated(what: str) -> AsyncIterator[None]:
    """Turn database errors into :class:`RegistryError` (details go to the log, not the wire)."""
    try:
        yield
    except SQLAlchemyError as exc:
        log.error("registry database failed to %s: %s", what, exc)
        raise RegistryError(f"the registry database failed to {what}") from exc


_READ_CACHE = -8192  # KiB of SQLite page cache per pooled connection (up to 15 under load)
_WRITE_CACHE = -32768  # for bulk writes: 5,000 rows spill a smaller cache mid-transaction


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")  # registry_terms rows go with their agent
    cursor.execute(f"PRAGMA cache_size={_READ_CACHE}")
    cursor.close()
    name, arity, function = name_order.SQL_FUNCTION
    dbapi_connection.create_function(name, arity, function, deterministic=True)


def _to_row(record: AgentRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "card_url": record.card_url,
        "name": record.name,
        "description": record.description,
        "skills": [s.to_json() for s in record.skills],
        "card": record.card,
        "registered_at": record.registered_at,
        "last_seen": record.last_seen,
        "card_etag": record.card_etag,
        "rev": token_hex(16),  # as random as uuid4().hex, a tenth of its cost
        "name_key": name_key(record.name),
        "words": words(record),
    }


_COLUMNS = [c.name for c in agents.columns]
_TERM_COLUMNS = [c.name for c in terms.columns]
_INSERT_SQL = tuple(
    f"INSERT INTO {t.name} ({', '.join(cs)}) VALUES ({', '.join('?' * len(cs))})"
    for t, cs in ((agents, _COLUMNS), (terms, _TERM_COLUMNS))
)
_dumps = json.JSONEncoder(allow_nan=False).encode  # json.dumps(allow_nan=False), built once
_ROW_ORDER = ["id", "card_url", "name", "description", "skills", "card", "registered_at"]
_ROW_ORDER += ["last_seen", "card_etag", "rev", "name_key", "words"]
if _COLUMNS != _ROW_ORDER or _TERM_COLUMNS != ["kind", "term", "name_key", "agent_id"]:
    # _row_values and term_values write their tuples in these orders
    raise RuntimeError(f"registry_agents columns changed: {_COLUMNS}")


def _row_values(record: AgentRecord, key: str, card_text: str | None) -> tuple[Any, ...]:
    """:func:`_to_row` in column order, its JSON columns encoded (for the driver itself);
    ``key`` is the name key, ``card_text`` the card's JSON text when the caller has it (the
    fetched body)."""
    return (
        record.id,
        record.card_url,
        record.name,
        record.description,
        _dumps([s.to_json() for s in record.skills]),
        _dumps(record.card) if card_text is None else card_text,
        record.registered_at,
        record.last_seen,
        record.card_etag,
        token_hex(16),
        key,
        words(record),
    )


@dataclass(frozen=True, slots=True)
class Rows:
    """Records as the driver writes them (:func:`rows_of`): picklable tuples in column order."""

    ids: list[str]
    urls: list[str]
    agents: list[tuple[Any, ...]]
    terms: list[tuple[str, ...]]


def rows_of(
    records: Iterable[AgentRecord], card_texts: Mapping[str, str | None] | None = None
) -> Rows:
    """The rows :meth:`AgentStore.save_many` writes for ``records`` (the last record of an id
    or card URL wins), exactly what :meth:`AgentStore.save` writes for each. ``card_texts``
    may give, by agent id, JSON text that :func:`safejson.loads` reads as that record's card
    (the body it was parsed from): it is stored as it is instead of encoding the card again."""
    chosen = list({r.card_url: r for r in {r.id: r for r in records}.values()}.values())
    texts = card_texts or {}
    out = Rows(ids=[r.id for r in chosen], urls=[r.card_url for r in chosen], agents=[], terms=[])
    for r in chosen:
        key = name_key(r.name)
        out.agents.append(_row_values(r, key, texts.get(r.id)))
        out.terms.extend(term_values(r, key))
    return out


def _deferred_indexes(dialect: str) -> list[str]:
    """The indexes a bulk load builds at the end (constraints' own indexes stay)."""
    names = [index.name for index in INDEXES if index.name]
    if dialect == "sqlite":
        return [*names, "registry_agents_last_seen", "registry_agents_window"]
    return [*names, *search_table.OLD_INDEXES]


class _Undecodable(Exception):
    """A row's column does not hold what the table says it holds."""


def _raw(column: Column[Any], dialect: str) -> ColumnElement[Any]:
    """``column`` as its stored text with no driver-side decoding (which would fail the whole
    fetch on one bad value): BLOB on SQLite (any column may hold anything there), TEXT for
    PostgreSQL's JSON columns (asyncpg would parse them), and floats untouched."""
    if isinstance(column.type, Float):
        return type_coerce(column, NullType()).label(column.name)
    if dialect == "sqlite":
        return type_coerce(cast(column, LargeBinary), NullType()).label(column.name)
    if isinstance(column.type, JSON):
        return type_coerce(cast(column, Text), NullType()).label(column.name)
    return type_coerce(column, NullType()).label(column.name)


def _id_of(value: object) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = value if isinstance(value, str) else repr(value)
    return text[:128].encode("utf-8", "replace").decode("utf-8")


def _text(values: dict[str, Any], name: str) -> str:
    value = values[name]
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Undecodable(f"column {name} is not valid UTF-8") from exc
    if not isinstance(value, str):
        raise _Undecodable(f"column {name} is not text ({type(value).__name__})")
    if "\x00" in value:
        raise _Undecodable(f"column {name} contains a NUL character")
    return value


def _json(values: dict[str, Any], name: str) -> Any:
    try:
        return safejson.loads(_text(values, name))
    except safejson.UnsafeJson as exc:
        raise _Undecodable(f"column {name}: {exc}") from exc


def _time(values: dict[str, Any], name: str) -> float:
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Undecodable(f"column {name} is not a number ({type(value).__name__})")
    if not safejson.finite_number(value):
        raise _Undecodable(f"column {name} is not a finite number")
    return float(value)


def _skill(value: object) -> Skill:
    # exact types: JSON decoding makes plain dicts, lists and strs (and this runs per skill
    # of every row a search reads)
    if type(value) is not dict:
        raise _Undecodable("an entry of column skills is not an object")
    skill_id, name = value.get("id"), value.get("name")
    description, tags = value.get("description"), value.get("tags")
    if not (
        type(skill_id) is str
        and type(name) is str
        and type(description) is str
        and type(tags) is list
    ):
        raise _Undecodable("an entry of column skills lacks id, name, description or tags")
    for tag in tags:
        if type(tag) is not str:
            raise _Undecodable("a tag in column skills is not a string")
    return Skill(id=skill_id, name=name, description=description, tags=tuple(tags))


def _seen_again(known: Stored, values: dict[str, Any]) -> Stored | BadRow:
    """A row decoded before at the same revision: ``known`` with the row's heartbeat time and
    whether it is served (what can change without a new revision)."""
    try:
        last_seen = _time(values, "last_seen")
    except _Undecodable as exc:
        return BadRow(known.record.id, str(exc))
    r = known.record
    return Stored(
        AgentRecord(
            r.id,
            r.card_url,
            r.name,
            r.description,
            r.skills,
            r.card,
            r.registered_at,
            last_seen,
            r.card_etag,
        ),
        rev=known.rev,
        served=values.get("name_key") is not None,
    )


def _decode(values: dict[str, Any]) -> Stored | BadRow:
    """A row read with :func:`_raw` columns (with or without ``card``)."""
    try:
        rev = values.get("rev")
        return Stored(
            _from_row(values),
            rev=_text(values, "rev") if rev is not None else "",
            served=values.get("name_key") is not None,
        )
    except _Undecodable as exc:
        return BadRow(_id_of(values.get("id")), str(exc))


def _from_row(values: dict[str, Any]) -> AgentRecord:
    skills = _json(values, "skills")
    if not isinstance(skills, list):
        raise _Undecodable("column skills is not a list")
    card: Any = {}
    if "card" in values:
        card = _json(values, "card")
        if not isinstance(card, dict):
            raise _Undecodable("column card is not an object")
    return AgentRecord(
        id=_text(values, "id"),
        card_url=_text(values, "card_url"),
        name=_text(values, "name"),
        description=_text(values, "description"),
        skills=tuple(_skill(s) for s in skills),
        card=card,
        registered_at=_time(values, "registered_at"),
        last_seen=_time(values, "last_seen"),
        card_etag=_text(values, "card_etag") if values.get("card_etag") is not None else None,
    )
