"""NodeTaskStore: the SDK's ``TaskStore`` plus the lifecycle a node drives.

A node calls :meth:`~NodeTaskStore.initialize` when it starts (connect, lock, create the schema)
and :meth:`~NodeTaskStore.close` when it stops. Every store :func:`node.store.open_task_store`
returns is one, so the node never probes a store for these methods.
"""

from __future__ import annotations

from abc import abstractmethod

from a2a.server.tasks import TaskStore


class NodeTaskStore(TaskStore):
    """A task store a node opens on start and closes on stop."""

    @abstractmethod
    async def initialize(self) -> None:
        """Get ready to serve (otherwise done on first use); calling it again does nothing."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and locks; a later call reopens."""
