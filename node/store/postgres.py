"""PostgresTaskStore: the shared task store for several replicas of a node (asyncpg pool).

Same table design and semantics as :class:`node.store.sqlite.SqliteTaskStore`: TEXT ids
(``COLLATE "C"`` so ids order by code point, like the SDK's in-memory store) within the limits of
:mod:`node.store.ids`, the task serialised as BYTEA, one ``INSERT … ON CONFLICT DO UPDATE`` per
save that refuses to change a terminal task (:mod:`node.store.terminal`), and the id of the
message that created each task for idempotent sends (:mod:`node.store.sends`). Every
acknowledged save is committed with the server's durability settings (``synchronous_commit``).

Replicas and restart recovery. Each store holds, for its whole life, a session-level advisory
lock in *shared* mode on a dedicated connection (key: a constant and ``hashtext`` of
``<schema>.<table>``), so every live replica of a table is visible to the others.
:meth:`PostgresTaskStore.fail_orphaned` first tries the same lock in *exclusive* mode: that
succeeds only when no other process holds it, i.e. no other replica is alive, and then it fails
the SUBMITTED/WORKING tasks the dead processes left behind. Otherwise it fails nothing and logs
how many other replicas use the table: their tasks are theirs (or a lease-based reaper's). The
lock dies with the connection, so a crashed replica stops counting at once. Session advisory
locks need a session: connect directly or through a pooler in session mode, not in transaction
mode (PgBouncer ``pool_mode=transaction``).

The column ``message_id``/``created_ns`` pair is added to a table created by an older version
on first start (``ALTER TABLE … ADD COLUMN``, under the schema lock).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from a2a.server.cluster import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.task import ListTasksCursor

from node.errors import ConfigError, StoreError
from node.protocol import TERMINAL
from node.store.ids import check_id, check_owner
from node.store.lifecycle import NodeTaskStore
from node.store.pg_pool import create_pool
from node.store.recovery import DEFAULT_REASON, RUNNING_STATES, failed_task
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
from node.store.terminal import TerminalTaskError
from node.store.versioned import EventRows

log = logging.getLogger(__name__)
_FAILURES = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, asyncio.TimeoutError)
REPLICA_LOCK_CLASS = 0x61326E6F
"""First key of the replica lock (``pg_advisory_lock_shared(class, hashtext(table))``)."""
SWEEP_LOCK_CLASS = 0x61326E70
"""First key of the lease sweep's transaction lock (one sweeping replica at a time)."""
DEFAULT_LEASE_S = 15.0
"""How long a running task's lease lasts; replicas renew every third of it."""
LEASE_EXPIRED_REASON = "the replica running this task stopped (its lease expired)"
LOCK_WAIT_S = 30.0
"""How long opening waits for a recovering replica's exclusive lock."""


class PostgresTaskStore(NodeTaskStore):
    """A2A task store in a PostgreSQL table (created on first use)."""

    def __init__(
        self,
        dsn: str,
        *,
        owner_resolver: OwnerResolver = resolve_user_scope,
        table: str = "tasks",
        min_size: int = 1,
        max_size: int = 10,
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        self.dsn = dsn
        if lease_s <= 0:
            raise ConfigError(f"lease_s must be greater than 0, not {lease_s}")
        self.lease_s = lease_s
        self._lease_ns = int(lease_s * 1e9)
        self.replica_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This process among the table's replicas (cancel notices, leases)."""
        self.owner_resolver = owner_resolver
        self.table = check_table_name(table)
        self._sizes = (min_size, max_size)
        self._pool: asyncpg.Pool | None = None
        self._presence: asyncpg.Connection | None = None  # holds the shared replica lock
        self._lock_key = 0
        self._init_lock = asyncio.Lock()
        t = table
        self._upsert = upsert_sql(t, "(" + ", ".join(f"${i + 1}" for i in range(ROW_WIDTH)) + ")")
        self._select = f"SELECT data FROM {t} WHERE owner = $1 AND id = $2"
        self._select_ts = f"SELECT ts_ns FROM {t} WHERE owner = $1 AND id = $2"
        self._delete = f"DELETE FROM {t} WHERE owner = $1 AND id = $2"
        self._by_message = find_by_message_sql(t, "$")
        self._select_versioned = f"SELECT data, version FROM {t} WHERE owner = $1 AND id = $2"
        self._events_after = events_after_sql(t, "$")
        self.channel = self.cancel_channel = ""  # NOTIFY channels, named on connect

    def _schema(self) -> str:
        t = self.table
        return f"""
            CREATE TABLE IF NOT EXISTS {t} (
                owner TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,
                context_id TEXT NOT NULL, state INTEGER NOT NULL, ts_ns BIGINT,
                data BYTEA NOT NULL, message_id TEXT COLLATE "C", created_ns BIGINT,
                version BIGINT NOT NULL DEFAULT 1, runner TEXT, lease_ns BIGINT,
                PRIMARY KEY (owner, id));
            CREATE TABLE IF NOT EXISTS {t}_events (
                task_id TEXT COLLATE "C" NOT NULL, seq BIGINT NOT NULL,
                owner TEXT COLLATE "C" NOT NULL, data BYTEA NOT NULL, created_ns BIGINT NOT NULL,
                PRIMARY KEY (task_id, seq, owner));
            CREATE INDEX IF NOT EXISTS {t}_events_by_time ON {t}_events (created_ns);
            CREATE INDEX IF NOT EXISTS {t}_by_time ON {t} (owner, ts_ns DESC NULLS LAST, id DESC);
            CREATE INDEX IF NOT EXISTS {t}_by_context ON {t} (owner, context_id);
            CREATE INDEX IF NOT EXISTS {t}_live ON {t} (state) WHERE state IN ({LIVE_STATES});
        """

    def _indexes(self) -> str:
        t = self.table
        return f"""
            CREATE INDEX IF NOT EXISTS {t}_by_message ON {t} (owner, message_id, created_ns DESC)
                WHERE message_id IS NOT NULL;
        """

    async def _migrate(self, conn: asyncpg.Connection) -> None:
        """Add the columns a table created by an older version lacks (only when missing)."""
        have = await conn.fetchval(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1)"
            " AND attname IN ('message_id', 'created_ns', 'version', 'runner', 'lease_ns')"
            " AND NOT attisdropped",
            self.table,
        )
        if have < 5:
            t = self.table
            await conn.execute(
                f'ALTER TABLE {t} ADD COLUMN IF NOT EXISTS message_id TEXT COLLATE "C",'
                " ADD COLUMN IF NOT EXISTS created_ns BIGINT,"
                " ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 1,"
                " ADD COLUMN IF NOT EXISTS runner TEXT, ADD COLUMN IF NOT EXISTS lease_ns BIGINT"
            )

    async def initialize(self) -> None:
        """Connect, create the schema and join the table's replicas (otherwise on first use)."""
        await self._connect()

    async def _connect(self) -> asyncpg.Pool:
        async with self._init_lock:
            if self._pool is not None:
                return self._pool
            try:
                pool = await create_pool(self.dsn, min_size=self._sizes[0], max_size=self._sizes[1])
            except (*_FAILURES, ValueError) as exc:
                raise StoreError(f"cannot connect to the task store: {exc}") from exc
            try:
                async with pool.acquire() as conn, conn.transaction():
                    # Replicas starting together would race on CREATE … IF NOT EXISTS.
                    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self.table)
                    await conn.execute(self._schema())
                    await self._migrate(conn)
                    await conn.execute(self._indexes())
                self._presence = await self._join(pool)
            except _FAILURES as exc:
                await pool.close()
                raise StoreError(f"cannot create the task table {self.table}: {exc}") from exc
            self._pool = pool
            return pool

    async def _join(self, pool: asyncpg.Pool) -> asyncpg.Connection:
        """A dedicated connection holding the shared replica lock of this table."""
        async with pool.acquire() as conn:
            self._lock_key = await conn.fetchval(
                "SELECT hashtext(current_schema() || '.' || lower($1))", self.table
            )
        suffix = f"{self._lock_key & 0xFFFFFFFF:08x}"  # schema and table: one channel per table
        self.channel, self.cancel_channel = f"a2a_events_{suffix}", f"a2a_cancel_{suffix}"
        presence = await asyncpg.connect(self.dsn)
        try:
            await presence.execute(
                "SELECT pg_advisory_lock_shared($1, $2)",
                REPLICA_LOCK_CLASS,
                self._lock_key,
                timeout=LOCK_WAIT_S,
            )
        except BaseException:
            await presence.close()
            raise
        return presence

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[asyncpg.Connection]:
        pool = self._pool or await self._connect()
        try:
            async with pool.acquire() as conn:
                yield conn
        except _FAILURES as exc:
            raise StoreError(f"task store failed ({type(exc).__name__})") from exc

    async def close(self) -> None:
        """Close the pool and leave the replicas (a later call reconnects)."""
        pool, self._pool = self._pool, None
        presence, self._presence = self._presence, None
        if presence is not None:
            await presence.close()
        if pool is not None:
            await pool.close()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace ``task`` for the caller's owner; committed when this returns.

        Raises :class:`~node.store.terminal.TerminalTaskError` when the stored task is terminal
        and ``task`` differs from it (the stored task is kept).
        """
        row = task_row(task, self.owner_resolver(context))
        async with self._conn() as conn:
            written = await conn.fetchrow(self._upsert, *row)
        if written is None:
            log.warning("refused a save of terminal task %s (store %s)", task.id, self.table)
            raise TerminalTaskError(task.id, task.status.state)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or ``None``."""
        owner = check_owner(self.owner_resolver(context))
        check_id(task_id, "id")
        async with self._conn() as conn:
            data = await conn.fetchval(self._select, owner, task_id)
        return None if data is None else Task.FromString(data)

    async def find_by_message(
        self, message_id: str, context: ServerCallContext, *, since_ns: int
    ) -> Task | None:
        """The caller's newest task created by ``message_id`` at or after ``since_ns``."""
        owner = check_owner(self.owner_resolver(context))
        check_id(message_id, "messageId")
        async with self._conn() as conn:
            data = await conn.fetchval(self._by_message, owner, message_id, since_ns)
        return None if data is None else Task.FromString(data)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (no error when absent)."""
        owner = check_owner(self.owner_resolver(context))
        check_id(task_id, "id")
        async with self._conn() as conn:
            await conn.execute(self._delete, owner, task_id)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks, newest status first."""
        owner = self.owner_resolver(context)
        check_list_params(params, owner)
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

    # -- versioned writes (node.store.versioned) --------------------------------------------

    def _cas_sql(self, *, prev: int, cancel: bool) -> tuple[str, int]:
        """One statement: the write, its event row and the NOTIFY; and its base arg count."""
        t = self.table
        n = 6 if cancel else ROW_WIDTH if prev == 0 else 7
        lease = (f"${n + 1}", f"${n + 2}")  # runner, lease expiry
        if cancel:
            base = cas_update_sql(t, "$", cancel=True, lease=lease)
        elif prev == 0:
            base = cas_insert_sql(t, "$", lease=lease)
        else:
            base = cas_update_sql(t, "$", cancel=False, lease=lease)
        ev, now, chan, cancel_chan, replica = (f"${n + i}" for i in range(3, 8))
        notify = f"pg_notify({chan}, $2)"
        if cancel:  # payload "<replica> <task id>": the replica running the task stops it
            notify += f", pg_notify({cancel_chan}, {replica}::text || ' ' || $2)"
        return (
            f"WITH w AS ({base}),"
            f" e AS (INSERT INTO {t}_events (owner, task_id, seq, data, created_ns)"
            f" SELECT $1, $2, version, {ev}, {now} FROM w WHERE {ev}::bytea IS NOT NULL)"
            f" SELECT version, {notify} FROM w",
            n,
        )

    async def cas_save(
        self, task: Task, owner: str, *, prev: int, cancel: bool, event: bytes | None
    ) -> int:
        """Write ``task`` as version ``prev + 1``, its event row and a NOTIFY, in one statement.

        Cancel also notifies the cancel channel, which the replica running the task listens to.
        """
        row = task_row(task, owner)
        sql, n = self._cas_sql(prev=prev, cancel=cancel)
        args = row if n == ROW_WIDTH else (*row[:6], prev)[:n]  # n: 8 insert, 7 update, 6 cancel
        now = time.time_ns()
        # The writer runs the task: it holds the lease while the task is SUBMITTED or WORKING.
        expiry = now + self._lease_ns if task.status.state in RUNNING_STATES else None
        extra = (self.replica_id, expiry, event, now, self.channel)
        async with self._conn() as conn:
            version = await conn.fetchval(
                sql, *args, *extra, *((self.cancel_channel, self.replica_id) if cancel else ())
            )
            if version is not None:
                return int(version)
            stored = await conn.fetchval(self._select, owner, task.id)
        if stored is not None and Task.FromString(stored).status.state in TERMINAL:
            raise TerminalTaskError(task.id, task.status.state)
        raise ConcurrentTaskModificationError(task.id)

    async def get_versioned(self, task_id: str, owner: str) -> tuple[Task, int] | None:
        """The owner's task ``task_id`` with its version, or ``None``."""
        check_owner(owner)
        check_id(task_id, "id")
        async with self._conn() as conn:
            found = await conn.fetchrow(self._select_versioned, owner, task_id)
        return None if found is None else (Task.FromString(found[0]), int(found[1]))

    async def read_events(self, task_id: str, after: int) -> EventRows:
        """``(seq, event)`` rows of ``task_id`` after ``after``, in order."""
        async with self._conn() as conn:
            rows = await conn.fetch(self._events_after, task_id, after)
        return [(int(seq), bytes(data)) for seq, data in rows]

    async def prune(self, *, events_before_ns: int, tasks_before_ns: int | None) -> int:
        """Delete event rows and (if given) terminal tasks older than the cut-offs; returns rows."""
        t = self.table
        async with self._conn() as conn:
            done = await conn.execute(prune_events_sql(t, "$"), events_before_ns)
            count = int(done.split()[-1])
            if tasks_before_ns is not None:
                done = await conn.execute(prune_tasks_sql(t, "$"), tasks_before_ns)
                count += int(done.split()[-1])
        return count

    # -- leases ------------------------------------------------------------------------------

    async def renew_leases(self) -> int:
        """Extend the lease of every live task this replica runs (one statement); returns how many.

        Interrupted tasks (input-, auth-required) hold no lease: they wait for the caller.
        """
        t = self.table
        async with self._conn() as conn:
            done = await conn.execute(
                f"UPDATE {t} SET lease_ns = $2 WHERE runner = $1 AND state IN ({LIVE_STATES})",
                self.replica_id,
                time.time_ns() + self._lease_ns,
            )
        return int(done.split()[-1])

    async def running_here(self) -> int:
        """How many live tasks this replica runs (what a drain waits for)."""
        async with self._conn() as conn:
            count: int = await conn.fetchval(
                f"SELECT count(*) FROM {self.table} WHERE runner = $1 AND state IN ({LIVE_STATES})",
                self.replica_id,
            )
        return count

    async def fail_expired(self, limit: int = 500) -> int:
        """Fail the live tasks whose lease expired (their replica died); returns how many.

        One replica at a time (a transaction advisory lock; the others return 0 at once). Each
        task gets FAILED with an event row and a NOTIFY, so subscribers elsewhere end too.
        """
        t = self.table
        now = time.time_ns()
        failed = 0
        async with self._conn() as conn, conn.transaction():
            if not await conn.fetchval(
                "SELECT pg_try_advisory_xact_lock($1, $2)", SWEEP_LOCK_CLASS, self._lock_key
            ):
                return 0
            rows = await conn.fetch(
                f"SELECT owner, data, runner FROM {t} WHERE state IN ({LIVE_STATES})"
                f" AND lease_ns < $1 LIMIT {int(limit)} FOR UPDATE SKIP LOCKED",
                now,
            )
            for owner, data, runner in rows:
                task = failed_task(Task.FromString(data), LEASE_EXPIRED_REASON)
                event = TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )
                version = await conn.fetchval(
                    f"UPDATE {t} SET state = $3, ts_ns = $4, data = $5, version = version + 1,"
                    " lease_ns = NULL WHERE owner = $1 AND id = $2 RETURNING version",
                    owner,
                    task.id,
                    task.status.state,
                    task_ts_ns(task),
                    task.SerializeToString(),
                )
                await conn.execute(
                    event_insert_sql(t, "$"),
                    owner,
                    task.id,
                    version,
                    to_stream_response(event).SerializeToString(),
                    now,
                )
                await conn.execute("SELECT pg_notify($1, $2)", self.channel, task.id)
                log.warning("task %s failed: its replica %s stopped renewing", task.id, runner)
                failed += 1
        return failed

    async def other_replicas(self) -> int:
        """How many other processes hold this table's replica lock."""
        await self._connect()
        assert self._presence is not None
        count: int = await self._presence.fetchval(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = ($1::int4)::oid AND objid = ($2::int4)::oid AND objsubid = 2"
            " AND pid <> pg_backend_pid()",
            REPLICA_LOCK_CLASS,
            self._lock_key,
        )
        return count

    async def fail_orphaned(self, reason: str = DEFAULT_REASON) -> int:
        """Fail every SUBMITTED/WORKING task (all owners) if no other replica is alive.

        Returns how many tasks were failed: 0 as well when other replicas hold the table's
        replica lock (their live tasks are not orphaned; nothing is touched).
        """
        await self._connect()
        presence = self._presence
        assert presence is not None
        alone = await presence.fetchval(
            "SELECT pg_try_advisory_lock($1, $2)", REPLICA_LOCK_CLASS, self._lock_key
        )
        if not alone:
            others = await self.other_replicas()
            log.warning(
                "%d other replica(s) use task table %s; orphaned tasks are left for them "
                "(or for lease recovery), none marked failed",
                others,
                self.table,
            )
            return 0
        try:
            return await self._fail_all(reason)
        finally:
            # Back to shared only: this replica keeps counting as alive.
            await presence.execute(
                "SELECT pg_advisory_unlock($1, $2)", REPLICA_LOCK_CLASS, self._lock_key
            )

    async def _fail_all(self, reason: str) -> int:
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
                f"UPDATE {t} SET state = $1, ts_ns = $2, data = $3, version = version + 1"
                " WHERE owner = $4 AND id = $5",
                updates,
            )
        return len(updates)
