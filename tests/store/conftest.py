"""Store fixtures: one behavioural suite over every task store.

``backend`` is parametrised over the in-memory store (the node's MemoryTaskStore), SqliteTaskStore
on a file in ``tmp_path`` and, only when ``A2A_NODE_TEST_PG_URL`` is set, PostgresTaskStore on a
fresh table (dropped at teardown). Without the variable the postgres parameter does not exist (no
skips). ``node_store`` gives the same durable choice as a node's ``store`` setting, for tests that
run whole nodes (``pg_table_url`` for a fresh PostgreSQL table of one's own).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore

from node.store.memory import MemoryTaskStore
from node.store.sqlite import SqliteTaskStore

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")
_PG = [pytest.param("postgres", marks=pytest.mark.postgres)] if PG_URL else []
DURABLE = ["sqlite", *_PG]
ALL = ["memory", *DURABLE]


class NamedUser(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return bool(self._name)

    @property
    def user_name(self) -> str:
        return self._name


def caller(name: str) -> ServerCallContext:
    return ServerCallContext(user=NamedUser(name))


@dataclass
class Backend:
    """Opens store instances over one storage (a file, a table, or one shared memory store)."""

    kind: str
    factory: Callable[[], TaskStore]
    opened: list[TaskStore] = field(default_factory=list)

    async def open(self) -> TaskStore:
        store = self.factory()
        if isinstance(store, InMemoryTaskStore):
            return store
        await store.initialize()  # type: ignore[attr-defined]
        self.opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self.opened:
            await store.close()  # type: ignore[attr-defined]


async def _backend(kind: str, tmp_path: Path) -> AsyncIterator[Backend]:
    if kind == "memory":
        shared = MemoryTaskStore()
        yield Backend(kind, lambda: shared)
    elif kind == "sqlite":
        backend = Backend(kind, lambda: SqliteTaskStore(tmp_path / "tasks.db"))
        yield backend
        await backend.close_all()
    else:
        from node.store.postgres import PostgresTaskStore

        table = f"t_{uuid.uuid4().hex[:16]}"
        backend = Backend(kind, lambda: PostgresTaskStore(PG_URL, table=table, max_size=4))
        try:
            yield backend
        finally:
            await backend.close_all()
            await drop_pg_table(table)


@pytest.fixture(params=ALL)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async for backend in _backend(request.param, tmp_path):
        yield backend


@pytest.fixture(params=DURABLE)
async def durable(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async for backend in _backend(request.param, tmp_path):
        yield backend


async def drop_pg_table(table: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f"DROP TABLE IF EXISTS {table}, {table}_events")
    finally:
        await conn.close()


@asynccontextmanager
async def pg_table_url() -> AsyncIterator[tuple[str, str]]:
    """``(store URL, table)`` of a fresh PostgreSQL table, dropped afterwards."""
    table = f"t_{uuid.uuid4().hex[:16]}"
    try:
        yield f"{PG_URL}?table={table}", table
    finally:
        await drop_pg_table(table)


@pytest.fixture(params=DURABLE)
async def node_store(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A node's ``store`` setting: ``sqlite`` (in its data dir) or a fresh PostgreSQL table."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    async with pg_table_url() as (url, _):
        yield url


@pytest.fixture
async def store(backend: Backend) -> TaskStore:
    return await backend.open()


@pytest.fixture
def alice() -> ServerCallContext:
    return caller("alice")


@pytest.fixture
def bob() -> ServerCallContext:
    return caller("bob")
