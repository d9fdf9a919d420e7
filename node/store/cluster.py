"""The SDK's cluster seam for a node: a versioned store and an event stream over one task store.

:func:`cluster_for` gives, for a SQLite or PostgreSQL task store, what the SDK's request handler
takes as ``task_store=`` and ``event_stream=``: the :class:`~node.store.versioned.VersionedStore`
view (compare-and-set, event rows) and the stream that tails those rows
(:class:`~node.store.event_stream.LocalEventStream` on SQLite,
:class:`~node.store.pg_events.PostgresEventStream` on PostgreSQL). The memory store has none
(one process, no rows): the SDK then streams from its in-process registry as before.

``on_cancel`` (PostgreSQL) is called with the id of every task canceled through another replica;
the node uses it to stop that task's executor at once if it runs here.

Leases (PostgreSQL): a replica's saves of a SUBMITTED or WORKING task record it as the task's
``runner`` with a lease expiry; every third of the lease (``?lease_s=``, default 15 s) each
replica renews all its leases in one statement and one replica at a time (transaction advisory
lock) fails the live tasks whose lease expired, so a task of a replica that died is FAILED within
lease + a third, and starting a replica never touches another one's live tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from node.store.event_stream import LocalEventStream, RowEventStream
from node.store.lifecycle import NodeTaskStore
from node.store.versioned import DEFAULT_EVENT_RETENTION_S, CasBackend, VersionedStore

log = logging.getLogger(__name__)
PRUNE_EVERY_S = 60.0
DRAIN_GRACE_S = 20.0
"""How long a stopping replica waits for its running tasks (k8s grace: 30 s)."""
DRAIN_POLL_S = 0.2


@dataclass
class Cluster:
    """A versioned store, its event stream and the retention job; started by the node."""

    store: VersionedStore
    stream: RowEventStream
    event_retention_s: float = DEFAULT_EVENT_RETENTION_S
    task_retention_s: float | None = None
    _pruner: asyncio.Task[None] | None = field(default=None, init=False)
    _leases: asyncio.Task[None] | None = field(default=None, init=False)

    def on_cancel(self, stop: Callable[[str], None]) -> None:
        """Call ``stop(task_id)`` for each task canceled through another replica (PostgreSQL)."""
        if hasattr(self.stream, "on_cancel"):
            self.stream.on_cancel = stop

    async def start(self) -> None:
        """Start listening (PostgreSQL) and the retention job; the task store must be open."""
        start = getattr(self.stream, "start", None)
        if start is not None:
            await start()
        self._pruner = asyncio.create_task(self._prune_forever(), name="task-retention")
        if hasattr(self.store.store, "renew_leases"):
            self._leases = asyncio.create_task(self._keep_leases(), name="task-leases")

    async def aclose(self) -> None:
        """Stop the retention and lease jobs and the listener."""
        for job in (self._pruner, self._leases):
            if job is not None:
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job
        self._pruner = self._leases = None
        close = getattr(self.stream, "aclose", None)
        if close is not None:
            await close()

    async def prune(self) -> int:
        """Delete event rows and finished tasks past their retention; returns rows deleted."""
        now = time.time_ns()
        backend = self.store.store
        assert isinstance(backend, CasBackend)
        tasks_before = (
            None if self.task_retention_s is None else now - int(self.task_retention_s * 1e9)
        )
        return await backend.prune(
            events_before_ns=now - int(self.event_retention_s * 1e9),
            tasks_before_ns=tasks_before,
        )

    async def _prune_forever(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_EVERY_S)
            try:
                deleted = await self.prune()
            except Exception as exc:  # the store is down: try again next period
                log.warning("retention pruning failed: %s", exc)
                continue
            if deleted:
                log.info("retention: deleted %d old event row(s) and finished task(s)", deleted)

    async def drain(self, grace_s: float = DRAIN_GRACE_S) -> None:
        """Wait up to ``grace_s`` for the tasks this replica runs to finish (PostgreSQL).

        The server has stopped taking requests (SIGTERM); leases are still renewed meanwhile.
        A task still running after the grace is left to lease expiry on another replica.
        """
        store = self.store.store
        running = getattr(store, "running_here", None)
        if running is None:
            return
        deadline = time.monotonic() + grace_s
        left = 0
        while time.monotonic() < deadline:
            try:
                left = await running()
            except Exception:  # the database is away: nothing to wait for
                return
            if not left:
                return
            await asyncio.sleep(DRAIN_POLL_S)
        log.warning(
            "drain: %d task(s) still running after %.0f s; left to lease expiry", left, grace_s
        )

    async def _keep_leases(self) -> None:
        """Every third of the lease: renew this replica's leases, fail expired ones (PostgreSQL)."""
        from node.store.postgres import PostgresTaskStore

        store = self.store.store
        assert isinstance(store, PostgresTaskStore)
        while True:
            await asyncio.sleep(store.lease_s / 3)
            try:
                await store.renew_leases()
                await store.fail_expired()
            except Exception as exc:  # the database is away: the next period tries again
                log.warning("lease renewal or sweep failed: %s", exc)


def cluster_for(
    task_store: NodeTaskStore,
    *,
    on_cancel: Callable[[str], None] | None = None,
    task_retention_s: float | None = None,
) -> Cluster | None:
    """The cluster seam over ``task_store``, or ``None`` for a store without event rows."""
    if not isinstance(task_store, CasBackend):
        return None
    stream: RowEventStream
    from node.store.sqlite import SqliteTaskStore

    if isinstance(task_store, SqliteTaskStore):
        stream = LocalEventStream(task_store.read_events)
    else:
        from node.store.pg_events import PostgresEventStream
        from node.store.postgres import PostgresTaskStore

        assert isinstance(task_store, PostgresTaskStore)
        stream = PostgresEventStream(task_store, on_cancel=on_cancel)
    return Cluster(VersionedStore(task_store), stream, task_retention_s=task_retention_s)
