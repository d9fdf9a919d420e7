"""The durable copy of the registry, through SQLAlchemy async core.

SQLite (a file, WAL mode) by default; any async URL works, e.g. ``postgresql+asyncpg://...``.
Registrations and deletions are committed before the API answers; heartbeats arrive in batches
(:meth:`AgentStore.beat`, one statement per batch). Reads are served from the in-memory index.

Two tables: ``registry_agents`` (one row per agent) and ``registry_changes`` (an append-only log
of the ids whose row was inserted, replaced or deleted, and by which replica), which other
replicas follow (:mod:`node.registry.replicas`). On PostgreSQL every writer of the log holds one
transaction-scoped advisory lock, so sequence numbers become visible in order and a follower
never skips a row committed late; SQLite has a single writer anyway.

Loading never trusts a row: every column is read as raw text (bytes on SQLite, whose columns can
hold anything) and decoded here, one row at a time, so a row that cannot be decoded is reported
(:class:`BadRow`) instead of failing the load. JSON is written without ``NaN``/``Infinity``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    cast,
    delete,
    event,
    func,
    insert,
    select,
    text,
    type_coerce,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from node.errors import RegistryError
from node.registry import safejson
from node.registry.records import AgentRecord, Skill

log = logging.getLogger(__name__)

metadata = MetaData()
agents = Table(
    "registry_agents",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("card_url", String(2048), nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("skills", JSON, nullable=False),
    Column("card", JSON, nullable=False),
    Column("registered_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
)
last_seen_index = Index("registry_agents_last_seen", agents.c.last_seen)
changes = Table(
    "registry_changes",
    metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("agent_id", String(128), nullable=False),
    Column("origin", String(64), nullable=False),  # the replica that wrote the change
    Column("at", Float, nullable=False),
)
CHANGE_LOCK = 0x5245_4743  # advisory lock key: writers of registry_changes (PostgreSQL)
SWEEP_LOCK = 0x5245_4753  # advisory lock key: one sweeper at a time (PostgreSQL)
CHANGE_RETENTION_S = 600.0
"""Change rows older than this are pruned by the sweep; a follower further behind reloads."""

_BEAT_SQL = {
    "postgresql": (
        "UPDATE registry_agents AS a SET last_seen = GREATEST(a.last_seen, b.ts) "
        "FROM unnest(CAST(:ids AS TEXT[]), CAST(:ts AS DOUBLE PRECISION[])) AS b(id, ts) "
        "WHERE a.id = b.id"
    ),
    "sqlite": (
        "UPDATE registry_agents SET last_seen = max(registry_agents.last_seen, b.ts) "
        "FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS ts "
        "FROM json_each(:beats)) AS b WHERE registry_agents.id = b.id"
    ),
}


@dataclass(frozen=True, slots=True)
class BadRow:
    """A stored row that could not be decoded into an :class:`AgentRecord`."""

    id: str  # the row's id as well as it can be read
    reason: str


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
    """Reads and writes :class:`AgentRecord` rows. Open before use, close when done."""

    def __init__(self, url: str) -> None:
        self._url = make_url(async_url(url))
        self._engine: AsyncEngine | None = None
        self.write_transactions = 0
        """Write transactions committed or attempted by this process (for tests and benches)."""

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
        engine = create_async_engine(
            self._url, json_serializer=partial(json.dumps, allow_nan=False)
        )
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        self._engine = engine
        if engine.dialect.name not in _BEAT_SQL:
            raise RegistryError(
                f"the registry runs on SQLite or PostgreSQL, not {engine.dialect.name}"
            )
        async with _translated("create the schema"), engine.begin() as conn:
            if engine.dialect.name == "postgresql":  # replicas starting together
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({CHANGE_LOCK})"))
            await conn.run_sync(metadata.create_all)
            await conn.run_sync(last_seen_index.create, checkfirst=True)  # older files lack it

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def load_all(self) -> tuple[list[AgentRecord], list[BadRow]]:
        """Every row that decodes, and the ones that do not (with the reason)."""
        engine = self._eng()
        columns = [_raw(c, engine.dialect.name) for c in agents.columns]
        async with _translated("load agents"), engine.connect() as conn:
            rows = (await conn.execute(select(*columns))).all()
        records: list[AgentRecord] = []
        bad: list[BadRow] = []
        for row in rows:
            values = dict(zip(agents.columns.keys(), row, strict=True))
            try:
                records.append(_from_row(values))
            except _Undecodable as exc:
                bad.append(BadRow(_id_of(values.get("id")), str(exc)))
        return records, bad

    async def get(self, agent_ids: Iterable[str]) -> dict[str, AgentRecord | BadRow]:
        """The stored rows of ``agent_ids`` (absent ids are left out)."""
        ids = list(dict.fromkeys(agent_ids))
        engine = self._eng()
        columns = [_raw(c, engine.dialect.name) for c in agents.columns]
        out: dict[str, AgentRecord | BadRow] = {}
        async with _translated("read agents"), engine.connect() as conn:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows = (await conn.execute(select(*columns).where(agents.c.id.in_(chunk)))).all()
                for row in rows:
                    values = dict(zip(agents.columns.keys(), row, strict=True))
                    try:
                        record = _from_row(values)
                        out[record.id] = record
                    except _Undecodable as exc:
                        bad = BadRow(_id_of(values.get("id")), str(exc))
                        out[bad.id] = bad
        return out

    async def save(
        self, record: AgentRecord, *, origin: str, live_after: float
    ) -> tuple[AgentRecord, bool]:
        """Insert ``record``, replacing any row with the same id or card URL (one transaction,
        under the change lock). A row for the same card URL with a heartbeat after
        ``live_after`` keeps its ``registered_at``; returns the record stored and whether it
        is new. Raises :class:`HeldElsewhere` when another card URL holds the id that recently.
        """
        async with self._changing("save an agent") as conn:
            rows = await conn.execute(
                select(
                    agents.c.id, agents.c.card_url, agents.c.last_seen, agents.c.registered_at
                ).where((agents.c.id == record.id) | (agents.c.card_url == record.card_url))
            )
            replaced, previous = [], None
            for agent_id, card_url, last_seen, registered_at in rows:
                live = last_seen > live_after
                if agent_id == record.id and card_url != record.card_url and live:
                    raise HeldElsewhere(card_url)
                if card_url == record.card_url and live:
                    previous = registered_at
                replaced.append(agent_id)
            if previous is not None:
                record = replace(record, registered_at=previous)
            if replaced:
                await conn.execute(delete(agents).where(agents.c.id.in_(replaced)))
            await conn.execute(agents.insert().values(**_to_row(record)))
            await self._log(conn, {record.id, *replaced}, origin, record.last_seen)
        return record, previous is None

    async def beat(self, beats: dict[str, float]) -> None:
        """Record heartbeats (id → time) in ONE statement; a row never moves back in time."""
        if not beats:
            return
        engine = self._eng()
        if engine.dialect.name == "postgresql":
            params: dict[str, Any] = {"ids": list(beats), "ts": list(beats.values())}
        else:
            params = {"beats": json.dumps(list(beats.items()))}
        async with _translated("record heartbeats"), engine.begin() as conn:
            self.write_transactions += 1
            await conn.execute(text(_BEAT_SQL[engine.dialect.name]), params)

    async def delete(self, agent_ids: Iterable[str], *, origin: str, now: float) -> None:
        ids = list(agent_ids)
        if not ids:
            return
        async with self._changing("delete agents") as conn:
            for start in range(0, len(ids), 500):
                await conn.execute(delete(agents).where(agents.c.id.in_(ids[start : start + 500])))
            await self._log(conn, ids, origin, now)

    async def sweep(self, cutoff: float, *, origin: str, now: float) -> list[str] | None:
        """Delete every row whose last heartbeat is before ``cutoff`` (one statement) and prune
        old change rows; return the deleted ids, or ``None`` when another replica is sweeping."""
        async with self._changing("sweep agents", sweep=True) as conn:
            if conn is None:
                return None
            stale = agents.c.last_seen < cutoff
            await conn.execute(
                insert(changes).from_select(
                    ["agent_id", "origin", "at"],
                    select(agents.c.id, bindparam("origin", origin), bindparam("at", now)).where(
                        stale
                    ),
                )
            )
            gone = (await conn.execute(delete(agents).where(stale).returning(agents.c.id))).all()
            await conn.execute(delete(changes).where(changes.c.at < now - CHANGE_RETENTION_S))
            return [row[0] for row in gone]

    async def last_change(self) -> int:
        """The newest change's sequence number (0 when there is none)."""
        async with _translated("read the change log"), self._eng().connect() as conn:
            return int((await conn.scalar(select(func.coalesce(func.max(changes.c.seq), 0)))) or 0)

    async def follow(
        self, after: int, beats_since: float, *, origin: str
    ) -> tuple[int, set[str], dict[str, float]]:
        """What other replicas changed: the newest sequence number, the ids changed after
        ``after`` by another origin, and the heartbeats recorded after ``beats_since``."""
        async with _translated("follow the change log"), self._eng().connect() as conn:
            rows = (
                await conn.execute(
                    select(changes.c.seq, changes.c.agent_id, changes.c.origin)
                    .where(changes.c.seq > after)
                    .order_by(changes.c.seq)
                    .limit(10_000)
                )
            ).all()
            beats = await conn.execute(
                select(agents.c.id, agents.c.last_seen).where(agents.c.last_seen > beats_since)
            )
            seen = {agent_id: float(last_seen) for agent_id, last_seen in beats}
        changed = {agent_id for _, agent_id, o in rows if o != origin}
        return (rows[-1][0] if rows else after), changed, seen

    @asynccontextmanager
    async def _changing(self, what: str, *, sweep: bool = False) -> AsyncIterator[Any]:
        """A write transaction holding the change lock (PostgreSQL). With ``sweep``, first try
        the sweep lock and yield ``None`` (nothing done) if another replica holds it."""
        engine = self._eng()
        async with _translated(what), engine.begin() as conn:
            self.write_transactions += 1
            if engine.dialect.name == "postgresql":
                if sweep and not await conn.scalar(
                    text(f"SELECT pg_try_advisory_xact_lock({SWEEP_LOCK})")
                ):
                    yield None
                    return
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({CHANGE_LOCK})"))
            yield conn

    @staticmethod
    async def _log(conn: AsyncConnection, ids: Iterable[str], origin: str, at: float) -> None:
        await conn.execute(
            insert(changes), [{"agent_id": i, "origin": origin, "at": at} for i in ids]
        )

    def _eng(self) -> AsyncEngine:
        if self._engine is None:
            raise RegistryError("the registry store is not open")
        return self._engine


@asynccontextmanager
async def _translated(what: str) -> AsyncIterator[None]:
    """Turn database errors into :class:`RegistryError` (details go to the log, not the wire)."""
    try:
        yield
    except SQLAlchemyError as exc:
        log.error("registry database failed to %s: %s", what, exc)
        raise RegistryError(f"the registry database failed to {what}") from exc


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


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
    }


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
    if not isinstance(value, dict):
        raise _Undecodable("an entry of column skills is not an object")
    skill_id, name, description, tags = (
        value.get(k) for k in ("id", "name", "description", "tags")
    )
    if not (
        isinstance(skill_id, str)
        and isinstance(name, str)
        and isinstance(description, str)
        and isinstance(tags, list)
    ):
        raise _Undecodable("an entry of column skills lacks id, name, description or tags")
    if not all(isinstance(t, str) for t in tags):
        raise _Undecodable("a tag in column skills is not a string")
    return Skill(id=skill_id, name=name, description=description, tags=tuple(tags))


def _from_row(values: dict[str, Any]) -> AgentRecord:
    skills = _json(values, "skills")
    if not isinstance(skills, list):
        raise _Undecodable("column skills is not a list")
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
    )
