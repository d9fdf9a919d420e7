"""SqlitePushConfigStore: push configs in their own table of the node's SQLite task file.

``push_configs(owner, task_id, config_id, created_ns, data)``, the config serialised as protobuf
bytes. Reads run on the event loop on their own read-only connection (WAL: they never wait for a
writer, microseconds from the page cache), which matters because delivery reads a task's configs
for its events. Writes (create/delete, rare) run in a worker thread on a second connection, one
at a time, each committed before it returns. The task store's file lock is its own: this store
only opens more connections to the same file in the same process.

Since this store is the table's only writer, it keeps the set of task ids that have a config
(read once, on the first delivery lookup, then added to by ``set_info``): the lookup of a task
without any config, which is every event of every task of a node nobody asked to push, answers
``[]`` without a read. A deleted config leaves its id in the set: the next lookup reads.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.types import TaskPushNotificationConfig

from node.errors import StoreError
from node.store.ids import check_id, check_owner
from node.store.push_configs import PushConfigStore, checked_config
from node.store.sql import check_table_name

T = TypeVar("T")


class SqlitePushConfigStore(PushConfigStore):
    """Push configs in one table of a SQLite file (created on first use)."""

    def __init__(
        self,
        path: str | Path,
        *,
        table: str = "push_configs",
        owner_resolver: OwnerResolver = resolve_user_scope,
    ) -> None:
        self.path = Path(path)
        self.table = check_table_name(table)
        self.owner_resolver = owner_resolver
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        self._write_lock = asyncio.Lock()
        t = self.table
        self._schema = f"""
            CREATE TABLE IF NOT EXISTS {t} (
                owner TEXT NOT NULL, task_id TEXT NOT NULL, config_id TEXT NOT NULL,
                created_ns INTEGER NOT NULL, data BLOB NOT NULL,
                PRIMARY KEY (owner, task_id, config_id));
            CREATE INDEX IF NOT EXISTS {t}_by_task ON {t} (task_id);
        """
        self._select = f"SELECT data FROM {t} WHERE owner = ? AND task_id = ? ORDER BY created_ns"
        self._dispatch = f"SELECT data FROM {t} WHERE task_id = ? ORDER BY created_ns"
        self._ids = f"SELECT config_id FROM {t} WHERE owner = ? AND task_id = ?"
        self._task_ids = f"SELECT DISTINCT task_id FROM {t}"
        self._configured: set[str] | None = None  # task ids with a config (module doc)
        self._upsert = (
            f"INSERT INTO {t} (owner, task_id, config_id, created_ns, data) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (owner, task_id, config_id) DO UPDATE SET data = excluded.data"
        )
        self._delete = f"DELETE FROM {t} WHERE owner = ? AND task_id = ?"

    def _open(self) -> tuple[sqlite3.Connection, sqlite3.Connection]:
        if self._reader is not None and self._writer is not None:
            return self._reader, self._writer
        conns: list[sqlite3.Connection] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for _ in range(2):
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=5.0
                )
                conns.append(conn)
                conn.execute("PRAGMA journal_mode=WAL")
            conns[0].executescript(f"BEGIN IMMEDIATE; {self._schema} COMMIT;")
            conns[1].execute("PRAGMA query_only=1")
        except (OSError, sqlite3.Error) as exc:
            for conn in conns:
                conn.close()
            raise StoreError(f"cannot open push configs in {self.path}: {exc}") from exc
        self._writer, self._reader = conns
        return self._reader, self._writer

    def _read(self, sql: str, args: Any) -> list[Any]:
        reader = self._open()[0]
        try:
            return reader.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"push config store failed: {exc}") from exc

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        writer = self._open()[1]
        async with self._write_lock:
            try:
                return await asyncio.to_thread(fn, writer)
            except sqlite3.Error as exc:
                raise StoreError(f"push config store failed: {exc}") from exc

    async def initialize(self) -> None:
        """Open the file and create the table (otherwise done on first use)."""
        self._open()

    async def close(self) -> None:
        """Close both connections (a later call reopens)."""
        async with self._write_lock:
            for conn in (self._reader, self._writer):
                if conn is not None:
                    conn.close()
            self._reader = self._writer = None
            self._configured = None

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        """Create or replace one config of the caller's; committed when this returns."""
        owner = self.owner_resolver(context)
        existing = [row[0] for row in self._read(self._ids, (check_owner(owner), task_id))]
        stored = checked_config(task_id, notification_config, owner, existing)
        self._with_configs().add(task_id)  # before the write: a lookup meanwhile reads the table
        row = (owner, task_id, stored.id, time.time_ns(), stored.SerializeToString())
        await self._write(lambda conn: conn.execute(self._upsert, row))
        return stored

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The caller's configs of ``task_id``, oldest first."""
        owner = check_owner(self.owner_resolver(context))
        return _parse(self._read(self._select, (owner, check_id(task_id, "taskId"))))

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """Every config of ``task_id``, whoever set it (for delivery)."""
        if task_id not in self._with_configs():
            return []
        return _parse(self._read(self._dispatch, (task_id,)))

    def _with_configs(self) -> set[str]:
        if self._configured is None:
            self._configured = {row[0] for row in self._read(self._task_ids, ())}
        return self._configured

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Delete one config of the caller's (or all of them on ``task_id`` without an id)."""
        owner = check_owner(self.owner_resolver(context))
        sql, args = self._delete, [owner, check_id(task_id, "taskId")]
        if config_id is not None:
            sql, args = f"{sql} AND config_id = ?", [*args, check_id(config_id, "id")]
        await self._write(lambda conn: conn.execute(sql, args))


def _parse(rows: list[Any]) -> list[TaskPushNotificationConfig]:
    return [TaskPushNotificationConfig.FromString(row[0]) for row in rows]
