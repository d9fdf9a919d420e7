"""PostgresPushConfigStore: push configs in their own table of the node's PostgreSQL database.

Same table as :mod:`node.store.push_sqlite` (``owner, task_id, config_id, created_ns, data``,
TEXT ids ``COLLATE "C"``, the config as BYTEA), on a small asyncpg pool of its own (two
connections: configs are written rarely and read once per batch of a task's events). Replicas
sharing the database share the configs.

Delivery looks up a task's configs for every batch of its events, and most tasks have none: the
lookups are cached per task (an LRU of :data:`CACHE_TASKS` tasks) while this store listens on its
table's channel. Every write of a config sends ``pg_notify(<channel>, <task id>)`` in its
transaction, so each replica drops that task's entry when the notification arrives, within ms of
the commit (a lookup that raced with a notification is not cached). When the listening
connection is lost, the cache is emptied and not used until a later lookup (at most every
:data:`RELISTEN_S`) listens again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.types import TaskPushNotificationConfig

from node.errors import StoreError
from node.store.ids import check_id, check_owner
from node.store.pg_pool import create_pool
from node.store.push_configs import PushConfigStore, checked_config
from node.store.sql import check_table_name

_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)
CACHE_TASKS = 10_000
"""How many tasks' dispatch lookups are kept (most recently used)."""
RELISTEN_S = 5.0
"""How often a lookup may try to listen again after the listening connection was lost."""


class PostgresPushConfigStore(PushConfigStore):
    """Push configs in a PostgreSQL table (created on first use)."""

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "push_configs",
        owner_resolver: OwnerResolver = resolve_user_scope,
        max_size: int = 2,
    ) -> None:
        self.dsn = dsn
        self.table = check_table_name(table)
        self.owner_resolver = owner_resolver
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._init_lock = asyncio.Lock()
        self.channel = ""  # named on connect: one per schema and table
        self._listener: asyncpg.Connection | None = None
        self._listen_tried = 0.0
        self._cache: OrderedDict[str, tuple[bytes, ...]] = OrderedDict()
        self._changes = 0  # notifications seen: a lookup overtaken by one is not cached
        t = self.table
        self._schema = f"""
            CREATE TABLE IF NOT EXISTS {t} (
                owner TEXT COLLATE "C" NOT NULL, task_id TEXT COLLATE "C" NOT NULL,
                config_id TEXT COLLATE "C" NOT NULL, created_ns BIGINT NOT NULL,
                data BYTEA NOT NULL, PRIMARY KEY (owner, task_id, config_id));
            CREATE INDEX IF NOT EXISTS {t}_by_task ON {t} (task_id);
        """
        self._select = f"SELECT data FROM {t} WHERE owner = $1 AND task_id = $2 ORDER BY created_ns"
        self._dispatch = f"SELECT data FROM {t} WHERE task_id = $1 ORDER BY created_ns"
        self._ids = f"SELECT config_id FROM {t} WHERE owner = $1 AND task_id = $2"
        self._upsert = (
            f"INSERT INTO {t} (owner, task_id, config_id, created_ns, data)"
            " VALUES ($1, $2, $3, $4, $5)"
            " ON CONFLICT (owner, task_id, config_id) DO UPDATE SET data = excluded.data"
        )
        self._delete = f"DELETE FROM {t} WHERE owner = $1 AND task_id = $2"

    async def _connect(self) -> asyncpg.Pool:
        async with self._init_lock:
            if self._pool is not None:
                return self._pool
            try:
                pool = await create_pool(self.dsn, min_size=1, max_size=self._max_size)
            except (*_FAILURES, ValueError) as exc:
                raise StoreError(f"cannot connect to the push config store: {exc}") from exc
            try:
                async with pool.acquire() as conn, conn.transaction():
                    # Replicas starting together would race on CREATE … IF NOT EXISTS.
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.table)
                    await conn.execute(self._schema)
                    key = await conn.fetchval(
                        "SELECT hashtext(current_schema() || '.' || lower($1))", self.table
                    )
            except _FAILURES as exc:
                await pool.close()
                raise StoreError(f"cannot create the table {self.table}: {exc}") from exc
            self.channel = f"a2a_push_{key & 0xFFFFFFFF:08x}"
            self._pool = pool
            await self._listen()
            return pool

    async def _listen(self) -> None:
        """Listen for config changes; without a listener lookups are not cached."""
        self._listen_tried = time.monotonic()
        try:
            conn = await asyncpg.connect(self.dsn)
        except (*_FAILURES, ValueError):
            return
        try:
            await conn.add_listener(self.channel, self._on_change)
        except _FAILURES:
            await conn.close()
            return
        conn.add_termination_listener(self._on_lost)
        self._listener = conn

    def _listening(self) -> bool:
        return self._listener is not None and not self._listener.is_closed()

    def _on_change(self, _conn: Any, _pid: int, _channel: str, task_id: str) -> None:
        self._changes += 1
        self._cache.pop(task_id, None)

    def _on_lost(self, _conn: Any) -> None:
        self._listener = None
        self._changes += 1
        self._cache.clear()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        pool = self._pool or await self._connect()
        try:
            async with pool.acquire() as conn:
                yield conn
        except _FAILURES as exc:
            raise StoreError(f"push config store failed ({type(exc).__name__})") from exc

    async def initialize(self) -> None:
        """Connect and create the table (otherwise done on first use)."""
        await self._connect()

    async def close(self) -> None:
        """Close the pool and the listener (a later call reconnects)."""
        pool, self._pool = self._pool, None
        listener, self._listener = self._listener, None
        self._cache.clear()
        if listener is not None:
            with contextlib.suppress(*_FAILURES):
                await listener.close()
        if pool is not None:
            await pool.close()

    async def _write(self, task_id: str, sql: str, *args: Any) -> None:
        """Run ``sql`` and notify the replicas that ``task_id``'s configs changed, atomically."""
        async with self._conn() as conn, conn.transaction():
            await conn.execute(sql, *args)
            await conn.execute("SELECT pg_notify($1, $2)", self.channel, task_id)
        self._on_change(None, 0, self.channel, task_id)  # here at once, before the notification

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        """Create or replace one config of the caller's; committed when this returns."""
        owner = check_owner(self.owner_resolver(context))
        check_id(task_id, "taskId")
        async with self._conn() as conn:
            existing = [r[0] for r in await conn.fetch(self._ids, owner, task_id)]
            stored = checked_config(task_id, notification_config, owner, existing)
        blob = stored.SerializeToString()
        await self._write(task_id, self._upsert, owner, task_id, stored.id, time.time_ns(), blob)
        return stored

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The caller's configs of ``task_id``, oldest first."""
        owner = check_owner(self.owner_resolver(context))
        async with self._conn() as conn:
            rows = await conn.fetch(self._select, owner, check_id(task_id, "taskId"))
        return [TaskPushNotificationConfig.FromString(r[0]) for r in rows]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every config of ``task_id``, whoever set it (for delivery; cached, see module docs)."""
        retry_at = self._listen_tried + RELISTEN_S
        if self._pool is not None and not self._listening() and time.monotonic() >= retry_at:
            await self._listen()
        blobs = self._cache.get(task_id) if self._listening() else None
        if blobs is not None:
            self._cache.move_to_end(task_id)
        else:
            changes = self._changes
            async with self._conn() as conn:
                rows = await conn.fetch(self._dispatch, task_id)
            blobs = tuple(bytes(r[0]) for r in rows)
            if self._listening() and changes == self._changes:
                self._cache[task_id] = blobs
                if len(self._cache) > CACHE_TASKS:
                    self._cache.popitem(last=False)
        return [TaskPushNotificationConfig.FromString(b) for b in blobs]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Delete one config of the caller's (or all of them on ``task_id`` without an id)."""
        owner = check_owner(self.owner_resolver(context))
        args: list[str] = [owner, check_id(task_id, "taskId")]
        sql = self._delete
        if config_id is not None:
            sql, args = f"{sql} AND config_id = $3", [*args, check_id(config_id, "id")]
        await self._write(args[1], sql, *args)
