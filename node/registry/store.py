"""The durable copy of the registry: one table, through SQLAlchemy async core.

SQLite (a file, WAL mode) by default; any async URL works, e.g. ``postgresql+asyncpg://...``.
Every write is committed before the API answers; reads are served from the in-memory index.

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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Float,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    cast,
    delete,
    event,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
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


class AgentStore:
    """Reads and writes :class:`AgentRecord` rows. Open before use, close when done."""

    def __init__(self, url: str) -> None:
        self._url = make_url(async_url(url))
        self._engine: AsyncEngine | None = None

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
        async with _translated("create the schema"), engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

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

    async def save(self, record: AgentRecord) -> None:
        """Insert ``record``, replacing any row with the same id or card URL (one transaction)."""
        async with _translated("save an agent"), self._eng().begin() as conn:
            await conn.execute(
                delete(agents).where(
                    (agents.c.id == record.id) | (agents.c.card_url == record.card_url)
                )
            )
            await conn.execute(agents.insert().values(**_to_row(record)))

    async def touch(self, agent_id: str, last_seen: float) -> None:
        async with _translated("record a heartbeat"), self._eng().begin() as conn:
            await conn.execute(
                update(agents).where(agents.c.id == agent_id).values(last_seen=last_seen)
            )

    async def delete(self, agent_ids: Iterable[str]) -> None:
        ids = list(agent_ids)
        if not ids:
            return
        async with _translated("delete agents"), self._eng().begin() as conn:
            for start in range(0, len(ids), 500):
                await conn.execute(delete(agents).where(agents.c.id.in_(ids[start : start + 500])))

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
