"""SqliteTaskStore: the default durable task store, one SQLite file in WAL mode.

A save is one upsert of the serialised task (``Task.SerializeToString()``) into
``tasks(owner, id, context_id, state, ts_ns, data)``. Owner scoping is the SDK's: the owner comes
from ``owner_resolver(context)`` and another owner's task is invisible. ``ListTasks`` follows the
SDK's semantics (see :mod:`node.store.sql`).

Durability: ``save()`` returns once its transaction is committed.

- ``synchronous="NORMAL"`` (default): commits are written to the WAL, not fsynced. A crash of the
  node *process* loses nothing acknowledged; a power loss or OS crash may lose the transactions
  committed since the last checkpoint (the file stays consistent; those tasks revert to their
  previous saved state or vanish if they were new).
- ``synchronous="FULL"``: the WAL is fsynced at each commit; a power loss loses nothing
  acknowledged. Group commit (below) shares one fsync among all saves queued meanwhile.

Threads: reads (get, list) run directly on the event loop on their own connection; in WAL mode
they never wait for the writer and are served from the page cache in microseconds. Writes go to
one writer thread that owns the second connection (:class:`~node.store.sqlite_writer.SqliteWriter`)
and commits everything queued since its previous commit as one multi-row upsert.

Why (measured on the 2-core target: blocking SendMessage through the SDK handler, wrk c=32,
server pinned to one core, other processes competing): requests per server CPU-second were
in-memory 700-760, this design 620-770, every statement directly on the loop (one connection)
580-660, the SDK's DatabaseTaskStore on SQLite 80-105. Direct calls also put each WAL write and
every automatic checkpoint (an fsync every few hundred saves) on the loop: with the disk busy, saves
averaged 0.2-0.6 ms and checkpoints stalled the loop 10-20 ms, so wrk saw 140-270 req/s where this
design served 350-540 in the same window. A one-thread executor for every call cost about twice
the CPU of a direct call and ~2 ms per call at 32 callers. Price of the writer thread: a lone
save waits for a thread hand-off (~0.1 ms). See ``bench/store_throughput.py``.

One process per file: opening takes an exclusive ``flock`` on ``<file>.lock`` (waiting up to
``lock_timeout``), so a second node on the same data directory fails to start instead of failing
the first one's running tasks with :meth:`SqliteTaskStore.fail_orphaned`.

Guards shared with the PostgreSQL store: ids within :mod:`node.store.ids`, terminal tasks final
(:mod:`node.store.terminal`: the batched upsert reports the rows it wrote with ``RETURNING``, so a
refused row fails only its own save, never the rest of its batch), and the id of the message that
created each task for idempotent sends (:mod:`node.store.sends`; a file created by an older
version gets the two columns on open).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from a2a.server.cluster import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor

from node.errors import ConfigError, StoreError
from node.protocol import TERMINAL
from node.store.ids import check_id, check_owner
from node.store.lifecycle import NodeTaskStore
from node.store.recovery import DEFAULT_REASON, failed_task
from node.store.sql import (
    LIVE_STATES,
    ROW_WIDTH,
    build_list_query,
    cas_insert_sql,
    cas_update_sql,
    check_list_params,
    check_table_name,
    event_insert_sql,
    events_after_sql,
    find_by_message_sql,
    page_response,
    parse_token,
    prune_events_sql,
    prune_tasks_sql,
    task_row,
    task_ts_ns,
    upsert_sql,
)
from node.store.sqlite_writer import Cas, Row, SqliteWriter
from node.store.terminal import TerminalTaskError
from node.store.versioned import EventRows

log = logging.getLogger(__name__)
T = TypeVar("T")
Synchronous = Literal["NORMAL", "FULL"]


class SqliteTaskStore(NodeTaskStore):
    """A2A task store in one SQLite file, created with its directory on first use.

    ``lock_timeout`` is how long opening waits for another process to release the file;
    ``table`` names the table (tests use one per case).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
        synchronous: Synchronous = "NORMAL",
        table: str = "tasks",
        lock_timeout: float = 5.0,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        self.path = Path(path)
        self.owner_resolver = owner_resolver
        self.synchronous = synchronous
        self.table = check_table_name(table)
        self.lock_timeout = lock_timeout
        self._reader: sqlite3.Connection | None = None  # used on the event loop
        self._writer: SqliteWriter | None = None  # its own connection and thread
        self._lock_fd: int | None = None
        t = table
        self._select = f"SELECT data FROM {t} WHERE owner = ? AND id = ?"
        self._select_ts = f"SELECT ts_ns FROM {t} WHERE owner = ? AND id = ?"
        self._delete = f"DELETE FROM {t} WHERE owner = ? AND id = ?"
        self._by_message = find_by_message_sql(t, "?")
        self._select_versioned = f"SELECT data, version FROM {t} WHERE owner = ? AND id = ?"
        self._cas_insert = cas_insert_sql(t, "?")
        self._cas_update = cas_update_sql(t, "?", cancel=False)
        self._cas_cancel = cas_update_sql(t, "?", cancel=True)
        self._event_insert = event_insert_sql(t, "?")
        self._events_after = events_after_sql(t, "?")

    def _schema(self, conn: sqlite3.Connection) -> str:
        t = self.table
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({t})")}
        migrate = (
            f"ALTER TABLE {t} ADD COLUMN message_id TEXT; "
            f"ALTER TABLE {t} ADD COLUMN created_ns INTEGER;"
            if columns and "message_id" not in columns
            else ""
        )
        if columns and "version" not in columns:
            migrate += f" ALTER TABLE {t} ADD COLUMN version INTEGER NOT NULL DEFAULT 1;"
        return f"""
            CREATE TABLE IF NOT EXISTS {t} (
                owner TEXT NOT NULL, id TEXT NOT NULL, context_id TEXT NOT NULL,
                state INTEGER NOT NULL, ts_ns INTEGER, data BLOB NOT NULL,
                message_id TEXT, created_ns INTEGER, version INTEGER NOT NULL DEFAULT 1,
                PRIMARY KEY (owner, id));
            {migrate}
            CREATE TABLE IF NOT EXISTS {t}_events (
                task_id TEXT NOT NULL, seq INTEGER NOT NULL, owner TEXT NOT NULL,
                data BLOB NOT NULL, created_ns INTEGER NOT NULL,
                PRIMARY KEY (task_id, seq, owner)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS {t}_events_by_time ON {t}_events (created_ns);
            CREATE INDEX IF NOT EXISTS {t}_by_time ON {t} (owner, ts_ns DESC, id DESC);
            CREATE INDEX IF NOT EXISTS {t}_by_context ON {t} (owner, context_id);
            CREATE INDEX IF NOT EXISTS {t}_live ON {t} (state) WHERE state IN ({LIVE_STATES});
            CREATE INDEX IF NOT EXISTS {t}_by_message ON {t} (owner, message_id, created_ns DESC)
                WHERE message_id IS NOT NULL;
        """

    def _open(self) -> tuple[sqlite3.Connection, SqliteWriter]:
        """Lock the file, create the schema, start the writer; returns (reader, writer)."""
        if self._reader is not None and self._writer is not None:
            return self._reader, self._writer
        conns: list[sqlite3.Connection] = []
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_file()
            for _ in range(2):
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                conns.append(conn)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
            conns[0].executescript(f"BEGIN IMMEDIATE; {self._schema(conns[0])} COMMIT;")
            conns[1].execute("PRAGMA query_only=1")
        except (OSError, sqlite3.Error) as exc:
            for conn in conns:
                conn.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            raise StoreError(f"cannot open task store {self.path}: {exc}") from exc
        self._writer = SqliteWriter(conns[0], self._upsert_sql, self._refused)
        self._reader = conns[1]
        return self._reader, self._writer

    def _lock_file(self) -> None:
        """Hold ``<db>.lock`` so that a second node on the same file fails instead of sharing it."""
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise StoreError(
                        f"task store {self.path} is in use by another process (another node?)"
                    ) from None
                time.sleep(0.05)

    def _upsert_sql(self, rows: int) -> str:
        one = "(" + ", ".join(["?"] * ROW_WIDTH) + ")"
        return upsert_sql(self.table, ", ".join([one] * rows))

    def _refused(self, row: Row) -> BaseException:
        """The error of a row the guarded upsert did not write (its stored task is terminal)."""
        log.warning("refused a save of terminal task %s (store %s)", row[1], self.path)
        return TerminalTaskError(row[1], row[3])

    def _read(self, sql: str, args: Any) -> list[Any]:
        reader = self._reader or self._open()[0]
        try:
            return reader.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"task store failed: {exc}") from exc

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        writer = self._writer or self._open()[1]
        try:
            return await writer.call(fn)
        except sqlite3.Error as exc:
            raise StoreError(f"task store failed: {exc}") from exc

    async def initialize(self) -> None:
        """Open the file, take its lock and create the schema (otherwise done on first use)."""
        self._open()

    async def close(self) -> None:
        """Finish pending writes and close (a later call reopens)."""
        writer, reader, self._writer, self._reader = self._writer, self._reader, None, None
        if writer is not None:
            writer.stop()
        if reader is not None:
            reader.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace ``task`` for the caller's owner; committed when this returns.

        Raises :class:`~node.store.terminal.TerminalTaskError` when the stored task is terminal
        and ``task`` differs from it (the stored task is kept).
        """
        row = task_row(task, self.owner_resolver(context))
        writer = self._writer or self._open()[1]
        try:
            await writer.upsert(row)
        except sqlite3.Error as exc:
            raise StoreError(f"task store failed: {exc}") from exc

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or ``None``."""
        owner = check_owner(self.owner_resolver(context))
        rows = self._read(self._select, (owner, check_id(task_id, "id")))
        return Task.FromString(rows[0][0]) if rows else None

    async def find_by_message(
        self, message_id: str, context: ServerCallContext, *, since_ns: int
    ) -> Task | None:
        """The caller's newest task created by ``message_id`` at or after ``since_ns``."""
        owner = check_owner(self.owner_resolver(context))
        args = (owner, check_id(message_id, "messageId"), since_ns)
        rows = self._read(self._by_message, args)
        return Task.FromString(rows[0][0]) if rows else None

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (no error when absent)."""
        args = (check_owner(self.owner_resolver(context)), check_id(task_id, "id"))
        await self._write(lambda conn: conn.execute(self._delete, args))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks, newest status first."""
        owner = self.owner_resolver(context)
        check_list_params(params, owner)
        start, legacy_id = parse_token(params.page_token)
        if legacy_id is not None:
            found = self._read(self._select_ts, (owner, legacy_id))
            if not found:
                raise InvalidParamsError(f"Invalid page token: {params.page_token}")
            start = ListTasksCursor(timestamp_ns=found[0][0], task_id=legacy_id)
        q = build_list_query(
            params,
            owner,
            table=self.table,
            placeholder="?",
            order_by="ts_ns DESC, id DESC",
            start=start,
            inclusive=legacy_id is not None,
        )
        total = self._read(q.count_sql, q.count_args)[0][0]
        return page_response(self._read(q.page_sql, q.page_args), total, q.limit)

    # -- versioned writes (node.store.versioned) --------------------------------------------

    async def cas_save(
        self, task: Task, owner: str, *, prev: int, cancel: bool, event: bytes | None
    ) -> int:
        """Write ``task`` as version ``prev + 1`` and its event row (``node.store.versioned``)."""
        row = task_row(task, owner)
        if cancel:
            sql, args = self._cas_cancel, row[:6]
        elif prev == 0:
            sql, args = self._cas_insert, row
        else:
            sql, args = self._cas_update, (*row[:6], prev)
        writer = self._writer or self._open()[1]
        try:
            version = await writer.cas(Cas(sql, args, self._event_insert, event))
        except sqlite3.Error as exc:
            raise StoreError(f"task store failed: {exc}") from exc
        if version is None:
            raise self._refused_cas(task, owner)
        return version

    def _refused_cas(self, task: Task, owner: str) -> ConcurrentTaskModificationError:
        found = self._read(self._select_versioned, (owner, task.id))
        if found and Task.FromString(found[0][0]).status.state in TERMINAL:
            return TerminalTaskError(task.id, task.status.state)
        return ConcurrentTaskModificationError(task.id)

    async def get_versioned(self, task_id: str, owner: str) -> tuple[Task, int] | None:
        """The owner's task ``task_id`` with its version, or ``None``."""
        rows = self._read(self._select_versioned, (check_owner(owner), check_id(task_id, "id")))
        return (Task.FromString(rows[0][0]), rows[0][1]) if rows else None

    async def read_events(self, task_id: str, after: int) -> EventRows:
        """``(seq, event)`` rows of ``task_id`` after ``after``, in order."""
        return [(seq, data) for seq, data in self._read(self._events_after, (task_id, after))]

    async def prune(self, *, events_before_ns: int, tasks_before_ns: int | None) -> int:
        """Delete event rows and (if given) terminal tasks older than the cut-offs; returns rows."""
        t = self.table

        def run(conn: sqlite3.Connection) -> int:
            count = conn.execute(prune_events_sql(t, "?"), (events_before_ns,)).rowcount
            if tasks_before_ns is not None:
                count += conn.execute(prune_tasks_sql(t, "?"), (tasks_before_ns,)).rowcount
            return int(count)

        return await self._write(run)

    async def fail_orphaned(self, reason: str = DEFAULT_REASON) -> int:
        """Set every SUBMITTED/WORKING task (all owners) to FAILED; returns how many."""
        return await self._write(lambda conn: self._fail_orphaned(conn, reason))

    def _fail_orphaned(self, conn: sqlite3.Connection, reason: str) -> int:
        t = self.table
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(f"SELECT owner, data FROM {t} WHERE state IN ({LIVE_STATES})")
            updates = []
            for owner, data in rows.fetchall():
                task = failed_task(Task.FromString(data), reason)
                blob = task.SerializeToString()
                updates.append((task.status.state, task_ts_ns(task), blob, owner, task.id))
            conn.executemany(
                f"UPDATE {t} SET state = ?, ts_ns = ?, data = ?, version = version + 1"
                " WHERE owner = ? AND id = ?",
                updates,
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return len(updates)
