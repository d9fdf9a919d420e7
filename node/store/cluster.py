"""The SDK's cluster seam for a node: a versioned store and an event stream over one task store.

:func:`cluster_for` gives, for a SQLite or PostgreSQL task store, what the SDK's request handler
takes as ``task_store=`` and ``event_stream=``: the :class:`~node.store.versioned.VersionedStore`
view (compare-and-set, event rows) and the stream that tails those rows
(:class:`~node.store.event_stream.LocalEventStream` on SQLite,
:class:`~node.store.pg_events.PostgresEventStream` on PostgreSQL). The memory store has none
(one process, no rows): the SDK then streams from its in-process registry as before.

``on_cancel`` (PostgreSQL) is called with the id of every task canceled through any replica; the
node uses it to stop that task's executor at once if it runs here.
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


@dataclass
class Cluster:
    """A versioned store, its event stream and the retention job; started by the node."""

    store: VersionedStore
    stream: RowEventStream
    event_retention_s: float = DEFAULT_EVENT_RETENTION_S
    task_retention_s: float | None = None
    _pruner: asyncio.Task[None] | None = field(default=None, init=False)

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

    async def aclose(self) -> None:
        """Stop the retention job and the listener."""
        pruner, self._pruner = self._pruner, None
        if pruner is not None:
            pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pruner
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
