"""The durable copy of the registry: one table, through SQLAlchemy async core.

SQLite (a file, WAL mode) by default; any async URL works, e.g. ``postgresql+asyncpg://...``.
Every write is committed before the API answers; reads are served from the in-memory index.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Float,
    MetaData,
    String,
    Table,
    Text,
    delete,
    event,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from node.errors import RegistryError
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
        engine = create_async_engine(self._url)
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        self._engine = engine
        async with _translated("create the schema"), engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def load_all(self) -> list[AgentRecord]:
        async with _translated("load agents"), self._eng().connect() as conn:
            rows = (await conn.execute(select(agents))).mappings().all()
        return [_from_row(row) for row in rows]

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


def _from_row(row: Any) -> AgentRecord:
    skills = tuple(
        Skill(id=s["id"], name=s["name"], description=s["description"], tags=tuple(s["tags"]))
        for s in row["skills"]
    )
    return AgentRecord(
        id=row["id"],
        card_url=row["card_url"],
        name=row["name"],
        description=row["description"],
        skills=skills,
        card=row["card"],
        registered_at=row["registered_at"],
        last_seen=row["last_seen"],
    )
