"""Task event streams across replicas: the SDK's ``TaskEventStream`` over our event rows.

Every versioned save writes the event that produced the task's state into ``<table>_events`` in
the task's own transaction (:mod:`node.store.versioned`); the row is the truth. A stream only
has to say *when* to read: :class:`RowEventStream` tails a task's rows (``seq > cursor``) and
sleeps between reads until it is woken for that task, with a slow re-read as a safety net.

- :class:`LocalEventStream` (SQLite: one process owns the file) is woken by ``publish``, which
  the SDK's consumer calls after each save in this same process.
- :class:`PostgresEventStream` is woken by PostgreSQL ``LISTEN/NOTIFY``: the saving transaction
  runs ``pg_notify(<channel>, task_id)``, delivered when it commits. One dedicated connection per
  replica listens; when it drops, the stream reconnects with backoff and every subscriber re-reads
  from its last ``seq``, so nothing is lost across a reconnect (NOTIFY itself is not durable).

Why NOTIFY rather than Redis Streams: measured on one host (``/work/shared/notes/scale-out.md``),
the wake-up latency is p50 0.7 ms / p99 1.9 ms against Redis's 0.48 / 0.9 ms, both far below the
20 ms target; NOTIFY is transactional (sent only if the save commits, in commit order) while an
XADD after the commit can be lost in a crash between the two; and it adds no stateful service
to run, secure and back up next to the PostgreSQL the replicas already share. Its limits (payload
under 8 KB: we send only the task id; one session per replica, so not through PgBouncer in
transaction mode) are the same as those of the replica lock.

A subscriber holds nothing when it ends: its waiter is removed in ``finally`` (the SDK closes
the generator with ``aclose()``), so remote subscribes leave no tasks or objects behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable

from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from a2a.server.cluster.database_event_stream import stream_response_to_event
from a2a.types import StreamResponse

from node.store.versioned import version_int

log = logging.getLogger(__name__)
ReadEvents = Callable[[str, int], Awaitable[list[tuple[int, bytes]]]]
SAFETY_REREAD_S = 5.0
"""A subscriber re-reads at least this often even when no wake-up came."""


class RowEventStream(TaskEventStream):
    """Tails event rows read by ``read(task_id, after_seq)``; subclasses decide when to wake."""

    def __init__(self, read: ReadEvents, *, reread_s: float = SAFETY_REREAD_S) -> None:
        self._read = read
        self._reread_s = reread_s
        self._waiters: dict[str, set[asyncio.Event]] = {}

    def wake(self, task_id: str) -> None:
        """New rows may exist for ``task_id``: every subscriber of it reads again."""
        for waiter in self._waiters.get(task_id, ()):
            waiter.set()

    def wake_all(self) -> None:
        """Every subscriber reads again (after a lost connection)."""
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.set()

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open (0 once all ended: nothing is left behind)."""
        return sum(len(w) for w in self._waiters.values())

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing to write: the store wrote the event row with the task."""

    async def destroy(self, task_id: str) -> None:
        """Nothing to release: rows are pruned by retention."""

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """Every event of ``task_id`` with a version after ``after``, in order, until closed."""
        cursor = version_int(after)
        waiter = asyncio.Event()
        self._waiters.setdefault(task_id, set()).add(waiter)
        try:
            while True:
                waiter.clear()
                try:
                    rows = await self._read(task_id, cursor)
                except Exception:  # a store outage: keep the subscriber, read again later
                    log.warning("reading events of task %s failed; retrying", task_id)
                    rows = []
                for seq, data in rows:
                    cursor = seq
                    event = stream_response_to_event(StreamResponse.FromString(data))
                    yield VersionedEvent(event, TaskVersion(seq))
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(waiter.wait(), self._reread_s)
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[task_id]


class LocalEventStream(RowEventStream):
    """One process (SQLite): ``publish`` after each save wakes this process's subscribers."""

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Wake the subscribers of ``task_id`` (the row is already committed)."""
        self.wake(task_id)

    async def aclose(self) -> None:
        """Nothing to close."""
