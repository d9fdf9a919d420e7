"""SqliteWriter: one thread owns the write connection and commits saves in groups.

Callers on any event loop ``await writer.upsert(row)`` or ``await writer.call(fn)``. A loop's
jobs are handed to the thread together, once per turn of that loop (``call_soon``): the saves of
every request a busy loop ran in one turn reach the thread as one batch. (Handed over one by one,
the thread woke for each and committed 1.1 jobs per batch at 330–370 µs of its CPU per job under
``bench/node_throughput.py`` load.) The thread takes everything queued since its last commit;
consecutive upserts become one multi-row ``INSERT … ON CONFLICT DO UPDATE`` (one transaction, one
WAL append), other jobs run alone in order. A future resolves only after its transaction
committed. Disk waits (WAL writes, checkpoint fsyncs) therefore happen off the event loop, and a
burst of saves costs one commit.

The upsert may decline rows (a guarded ``ON CONFLICT DO UPDATE … WHERE``): it must end in
``RETURNING owner, id`` (a row's first two values), and each row it did not return fails only its
own future, with ``refused(row)``. A statement never holds the same key twice, so each returned
key names exactly one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
Row = tuple[Any, ...]
MAX_ROWS = 500  # rows per multi-row statement (6 variables each, well under SQLite's limit)


@dataclass(slots=True, frozen=True)
class Cas:
    """A compare-and-set write: ``sql`` returns the new version or no row; then ``event``.

    ``args`` start with ``(owner, task_id)``; the event row is ``event_sql`` with
    ``(owner, task_id, version, event, now_ns)``.
    """

    sql: str
    args: Row
    event_sql: str
    event: bytes | None


@dataclass(slots=True)
class _Job:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    row: Row | None = None  # an upsert row, or …
    fn: Callable[[sqlite3.Connection], Any] | None = None  # … any other work, or …
    cas: Cas | None = None  # … a compare-and-set write
    result: Any = None
    error: BaseException | None = field(default=None)


def _settle(jobs: list[_Job]) -> None:
    for job in jobs:
        if job.future.cancelled():
            continue
        if job.error is not None:
            job.future.set_exception(job.error)
        else:
            job.future.set_result(job.result)


class SqliteWriter:
    """The write side of a SqliteTaskStore; ``upsert_sql(n)`` builds the n-row statement."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        upsert_sql: Callable[[int], str],
        refused: Callable[[Row], BaseException],
    ) -> None:
        self._conn = conn
        self._upsert_sql = upsert_sql
        self._refused = refused
        self._jobs: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._turn: dict[asyncio.AbstractEventLoop, list[_Job]] = {}  # this turn's, per loop
        self._thread = threading.Thread(target=self._serve, name="sqlite-task-writer", daemon=True)
        self._thread.start()

    def _submit(
        self,
        row: Row | None = None,
        fn: Callable[[sqlite3.Connection], Any] | None = None,
        cas: Cas | None = None,
    ) -> Any:
        loop = asyncio.get_running_loop()
        job = _Job(loop, loop.create_future(), row, fn, cas)
        jobs = self._turn.get(loop)
        if jobs is None:
            self._turn[loop] = [job]
            loop.call_soon(self._hand_over, loop)
        else:
            jobs.append(job)
        return job.future

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        jobs = self._turn.pop(loop, None)
        if jobs:
            self._jobs.put(jobs)

    async def upsert(self, row: Row) -> None:
        """Insert or update one row; returns once committed."""
        await self._submit(row=row)

    async def cas(self, cas: Cas) -> int | None:
        """Run one compare-and-set write; its new version, or ``None`` when it was refused."""
        result: int | None = await self._submit(cas=cas)
        return result

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in the writer thread (``fn`` opens a transaction if it needs one)."""
        result: T = await self._submit(fn=fn)
        return result

    def stop(self) -> None:
        """Finish the queued jobs, end the thread and close the connection (blocks until then)."""
        for loop in list(self._turn):
            self._hand_over(loop)
        self._jobs.put(None)
        self._thread.join()
        self._conn.close()

    def _serve(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            batch = first
            while not self._jobs.empty() and len(batch) < MAX_ROWS:
                jobs = self._jobs.get()
                if jobs is None:
                    self._jobs.put(None)  # stop after this batch
                    break
                batch += jobs
            self._run(batch)
            by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
            for job in batch:
                by_loop.setdefault(job.loop, []).append(job)
            for loop, jobs in by_loop.items():
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(_settle, jobs)

    def _run(self, batch: list[_Job]) -> None:
        start = 0
        while start < len(batch):
            end = start
            keys: set[Row] = set()
            while (
                end < len(batch)
                and end - start < MAX_ROWS
                and (row := batch[end].row) is not None
                and row[:2] not in keys
            ):
                keys.add(row[:2])
                end += 1
            if end > start:  # consecutive upserts of distinct keys: one statement, one transaction
                self._upsert(batch[start:end])
                start = end
                continue
            while end < len(batch) and batch[end].cas is not None:
                end += 1
            if end > start:  # consecutive compare-and-set writes: one transaction
                self._cas(batch[start:end])
                start = end
            else:
                job = batch[start]
                try:
                    job.result = job.fn(self._conn) if job.fn else None
                except Exception as exc:
                    job.error = exc
                start += 1

    def _upsert(self, run: list[_Job]) -> None:
        rows = [job.row or () for job in run]
        try:
            params = [value for row in rows for value in row]
            written = {tuple(r) for r in self._conn.execute(self._upsert_sql(len(run)), params)}
        except Exception as exc:
            for job in run:
                job.error = exc
            return
        for job, row in zip(run, rows, strict=True):
            if row[:2] not in written:
                job.error = self._refused(row)

    def _cas(self, run: list[_Job]) -> None:
        conn = self._conn
        now = time.time_ns()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in run:
                cas = job.cas
                assert cas is not None
                found = conn.execute(cas.sql, cas.args).fetchone()
                job.result = None if found is None else found[0]
                if found is not None and cas.event is not None:
                    conn.execute(cas.event_sql, (*cas.args[:2], found[0], cas.event, now))
            conn.execute("COMMIT")
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in run:
                job.result, job.error = None, exc
