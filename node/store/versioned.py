"""The SDK's versioned task store contract (``a2a.server.cluster``) on our SQL stores.

Every task row carries a ``version`` (1 at creation, +1 per write, whoever writes: the plain
``save`` of the lean path and recovery bumps it too). :class:`VersionedStore` is the
``VersionedTaskStore`` the SDK's request handler uses; it wraps a :class:`CasBackend`
(:class:`~node.store.sqlite.SqliteTaskStore`, :class:`~node.store.postgres.PostgresTaskStore`),
which writes in SQL:

- a first write (``prev_version`` MISSING) inserts version 1 and fails if the row exists;
- a later write updates only ``WHERE version = prev AND state NOT IN (terminal)``;
- a write moving the task to CANCELED skips the version check but not the terminal one (a remote
  cancel wins over a running replica, never over a finished task);

and in the same transaction appends the event that produced the state to ``<table>_events``
``(owner, task_id, seq, data, created_ns)`` with ``seq`` = the new version, so the event log
and the task never disagree. A refused write raises ``ConcurrentTaskModificationError`` (or its
subclass :class:`~node.store.terminal.TerminalTaskError` when the stored task is terminal): the
SDK's consumer then reloads the task and, finding it terminal, stops the executor.

Event rows are read by the event streams (:mod:`node.store.event_stream`) and pruned by
``prune`` after the retention period (:data:`DEFAULT_EVENT_RETENTION_S`), together with
finished tasks when a task retention is set.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from a2a.server.cluster import StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.owner_resolver import OwnerResolver
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.proto_utils import to_stream_response

from node.store.lifecycle import NodeTaskStore

EventRows = list[tuple[int, bytes]]
"""``(seq, StreamResponse bytes)`` event rows, oldest first."""
DEFAULT_EVENT_RETENTION_S = 3600.0
"""How long event rows are kept: long enough for any subscriber to catch up."""


def version_int(version: TaskVersion) -> int:
    """The integer inside ``version`` (0 for MISSING); ``TypeError`` for a foreign version."""
    value = version._value  # TaskVersion exposes no accessor
    if not isinstance(value, int):
        raise TypeError(f"expected an integer task version, got {type(value).__name__}")
    return value


@runtime_checkable
class CasBackend(Protocol):
    """A node store that can write with compare-and-set and log events (see module docs)."""

    owner_resolver: OwnerResolver

    async def cas_save(
        self, task: Task, owner: str, *, prev: int, cancel: bool, event: bytes | None
    ) -> int:
        """Write ``task`` as version ``prev + 1`` (see module docs); returns the new version."""
        ...

    async def get_versioned(self, task_id: str, owner: str) -> tuple[Task, int] | None:
        """The owner's task with its version, or ``None``."""
        ...

    async def read_events(self, task_id: str, after: int) -> EventRows:
        """``(seq, StreamResponse bytes)`` of ``task_id`` with ``seq > after``, in order."""
        ...

    async def prune(self, *, events_before_ns: int, tasks_before_ns: int | None) -> int:
        """Delete event rows and (if given) terminal tasks older than the cut-offs."""
        ...


class VersionedStore(VersionedTaskStore):
    """The ``VersionedTaskStore`` view of ``store``; ``store`` stays the plain ``TaskStore``."""

    def __init__(self, store: NodeTaskStore) -> None:
        if not isinstance(store, CasBackend):
            raise TypeError(f"{type(store).__name__} cannot compare-and-set")
        self.store = store
        self._cas: CasBackend = store
        self.owner_resolver = store.owner_resolver

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Persist ``task`` if the stored version is still ``prev_version`` (module docs)."""
        del prev
        blob = None if event is None else to_stream_response(event).SerializeToString()
        version = await self._cas.cas_save(
            task,
            self.owner_resolver(context),
            prev=version_int(prev_version),
            cancel=task.status.state == TaskState.TASK_STATE_CANCELED,
            event=blob,
        )
        return TaskVersion(version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The caller's task with the version it was read at."""
        found = await self._cas.get_versioned(task_id, self.owner_resolver(context))
        return None if found is None else StoredTask(found[0], TaskVersion(found[1]))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks (the plain store's ``list``)."""
        return await self.store.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task and its event rows."""
        await self.store.delete(task_id, context)
