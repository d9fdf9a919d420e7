"""MemoryTaskStore: the SDK's in-memory store with the guards of the durable stores.

Same rules as :class:`~node.store.sqlite.SqliteTaskStore` and
:class:`~node.store.postgres.PostgresTaskStore`, so a node behaves the same on every store: ids
within :mod:`node.store.ids`, terminal tasks final (:mod:`node.store.terminal`), and the tasks
created by each message findable for idempotent sends (:mod:`node.store.sends`) through a bounded
in-process map (the newest ``max_sends`` entries). Everything is lost on restart, as before.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task

from node.store.ids import check_id, check_owner
from node.store.lifecycle import NodeTaskStore
from node.store.sends import creating_message_id
from node.store.sql import check_list_params, parse_token
from node.store.terminal import TerminalTaskError, refuses

MAX_SENDS = 100_000


class MemoryTaskStore(InMemoryTaskStore, NodeTaskStore):
    """In-memory task store (lost on restart) with id checks, final terminal states and sends."""

    def __init__(
        self, owner_resolver: OwnerResolver = resolve_user_scope, *, max_sends: int = MAX_SENDS
    ) -> None:
        super().__init__(owner_resolver=owner_resolver)
        self.owner_resolver = owner_resolver
        self._max_sends = max_sends
        # (owner, message id) -> (task id, created ns), oldest first
        self._sends: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()
        self._write_lock = asyncio.Lock()

    async def initialize(self) -> None:
        """Nothing to open: the tasks live in this process."""

    async def close(self) -> None:
        """Nothing to release (the tasks stay until the process ends)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        """Insert or replace ``task``; ``TerminalTaskError`` if its stored copy is terminal."""
        owner = check_owner(self.owner_resolver(context))
        check_id(task.id, "id")
        check_id(task.context_id, "contextId")
        async with self._write_lock:
            stored = await super().get(task.id, context)
            if refuses(stored, task):
                raise TerminalTaskError(task.id, task.status.state)
            await super().save(task, context)
        message_id = creating_message_id(task)
        if stored is None and message_id is not None:
            self._sends[(owner, message_id)] = (task.id, time.time_ns())
            self._sends.move_to_end((owner, message_id))
            while len(self._sends) > self._max_sends:
                self._sends.popitem(last=False)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        """The caller's task ``task_id``, or ``None``."""
        check_owner(self.owner_resolver(context))
        return await super().get(check_id(task_id, "id"), context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Delete the caller's task ``task_id`` (no error when absent)."""
        check_owner(self.owner_resolver(context))
        await super().delete(check_id(task_id, "id"), context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """One page of the caller's tasks, newest status first."""
        check_list_params(params, self.owner_resolver(context))
        parse_token(params.page_token)  # the same token checks as the SQL stores
        return await super().list(params, context)

    async def find_by_message(
        self, message_id: str, context: ServerCallContext, *, since_ns: int
    ) -> Task | None:
        """The caller's task created by ``message_id`` at or after ``since_ns``."""
        owner = check_owner(self.owner_resolver(context))
        found = self._sends.get((owner, check_id(message_id, "messageId")))
        if found is None or found[1] < since_ns:
            return None
        return await super().get(found[0], context)
