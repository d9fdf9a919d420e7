"""PostgresTaskStore: the shared task store for several replicas of a node (asyncpg pool).

Same table design and semantics as :class:`node.store.sqlite.SqliteTaskStore`: TEXT ids without a
length limit (``COLLATE "C"`` so ids order by code point, like the SDK's in-memory store), the task
serialised as BYTEA, one ``INSERT … ON CONFLICT DO UPDATE`` per save. Every acknowledged save is
committed with the server's durability settings (``synchronous_commit``).

:meth:`PostgresTaskStore.fail_interrupted` fails the live tasks of *every* replica sharing the
table: call it only when no other replica is running (e.g. a single-replica restart).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor

from node.errors import StoreError
from node.store.recovery import DEFAULT_REASON, failed_task
from node.store.sql import (
    LIVE_STATES,
    build_list_query,
    check_table_name,
    page_response,
    parse_token,
    task_ts_ns,
)

_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)


class PostgresTaskStore(TaskStore):
    """A2A task store in a PostgreSQL table (created on first use)."""

    def __init__(
        self,
        dsn: str,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
        table: str = "tasks",
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self.dsn = dsn
        self.owner_resolver = owner_resolver
        self.table = check_table_name(table)
        self._sizes = (min_size, max_size)
        self._pool: asyncpg.Pool | None = None
        self._init_lock = asyncio.Lock()
        t = table
        self._upsert = (
            f"INSERT INTO {t} (owner, id, context_id, state, ts_ns, data)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, id) DO UPDATE SET"
            " context_id = excluded.context_id, state = excluded.state,"
            " ts_ns = excluded.ts_ns, data = excluded.data"
        )
        self._select = f"SELECT data FROM {t} WHERE owner = $1 AND id = $2"
        self._select_ts = f"SELECT ts_ns FROM {t} WHERE owner = $1 AND id = $2"
        self._delete = f"DELETE FROM {t} WHERE owner = $1 AND id = $2"

    def _schema(self) -> str:
        t = self.table
        return f"""
            CREATE TABLE IF NOT EXISTS {t} (
                owner TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
                context_id TEXT NOT NULL, state INTEGER NOT NULL, ts_ns BIGINT,
                data BYTEA NOT NULL, PRIMARY KEY (owner, id));
            CREATE INDEX IF NOT EXISTS {t}_by_time ON {t} (owner, ts_ns DESC NULLS LAST, id DESC);
            CREATE INDEX IF NOT EXISTS {t}_by_context ON {t} (owner, context_id);
            CREATE INDEX IF NOT EXISTS {t}_live ON {t} (state) WHERE state IN ({LIVE_STATES});
        """

    async def initialize(self) -> None:
        """Create the connection pool and the schema (otherwise done on first use)."""
        await self._connect()

    async def _connect(self) -> asyncpg.Pool:
        async with self._init_lock:
            if self._pool is not None:
                return self._pool
            try:
                pool = await asyncpg.create_pool(
                    self.dsn, min_size=self._sizes[0], max_size=self._sizes[1]
                )
            except (*_FAILURES, ValueError) as exc:
                raise StoreError(f"cannot connect to the task store: {exc}") from exc
            try:
                async with pool.acquire() as conn, conn.transaction():
                    # Replicas starting together would race on CREATE … IF NOT EXISTS.
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.table)
                    await conn.execute(self._schema())
            except _FAILURES as exc:
                await pool.close()
                raise StoreError(f"cannot create the task table {self.table}: {exc}") from exc
            self._pool = pool
            return pool

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        pool = self._pool or await self._connect()
        try:
            async with pool.acquire() as conn:
                yield conn
        except _FAILURES as exc:
            raise StoreError(f"task store failed ({type(exc).__name__})") from exc

    async def close(self) -> None:
        """Close the pool (a later call reconnects)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace ``task`` for the caller's owner; committed when this returns."""
        owner = self.owner_resolver(context)
        args = (task.id, task.context_id, task.status.state, task_ts_ns(task))
        async with self._conn() as conn:
            await conn.execute(self._upsert, owner, *args, task.SerializeToString())

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or ``None``."""
        async with self._conn() as conn:
            data = await conn.fetchval(self._select, self.owner_resolver(context), task_id)
        return None if data is None else Task.FromString(data)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (no error when absent)."""
        async with self._conn() as conn:
            await conn.execute(self._delete, self.owner_resolver(context), task_id)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks, newest status first."""
        owner = self.owner_resolver(context)
        start, legacy_id = parse_token(params.page_token)
        async with self._conn() as conn:
            if legacy_id is not None:
                found: list[Any] = await conn.fetch(self._select_ts, owner, legacy_id)
                if not found:
                    raise InvalidParamsError(f"Invalid page token: {params.page_token}")
                start = ListTasksCursor(timestamp_ns=found[0][0], task_id=legacy_id)
            q = build_list_query(
                params,
                owner,
                table=self.table,
                placeholder="$",
                order_by="ts_ns DESC NULLS LAST, id DESC",
                start=start,
                inclusive=legacy_id is not None,
            )
            total = await conn.fetchval(q.count_sql, *q.count_args)
            rows = await conn.fetch(q.page_sql, *q.page_args)
        return page_response(rows, total, q.limit)

    async def fail_interrupted(self, reason: str = DEFAULT_REASON) -> int:
        """Set every SUBMITTED/WORKING task (all owners) to FAILED; returns how many."""
        t = self.table
        async with self._conn() as conn, conn.transaction():
            rows = await conn.fetch(
                f"SELECT owner, data FROM {t} WHERE state IN ({LIVE_STATES}) FOR UPDATE"
            )
            updates = []
            for owner, data in rows:
                task = failed_task(Task.FromString(data), reason)
                blob = task.SerializeToString()
                updates.append((task.status.state, task_ts_ns(task), blob, owner, task.id))
            await conn.executemany(
                f"UPDATE {t} SET state = $1, ts_ns = $2, data = $3 WHERE owner = $4 AND id = $5",
                updates,
            )
        return len(updates)
