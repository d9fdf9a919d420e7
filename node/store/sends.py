"""Idempotent sends: which message created a task, and how a store finds the task again.

Every task the node creates keeps the message that created it as ``history[0]`` (the SDK's
``new_task_from_user_message``). Stores that support idempotent sends record that message's id
next to the task when the task is first saved (SQL: columns ``message_id`` and ``created_ns``,
indexed by ``(owner, message_id)``; memory: a bounded map) and answer
:meth:`SendIndex.find_by_message`. The request handler (``node.server.request_handler``) uses it
so that a ``SendMessage`` retried with the same ``messageId`` returns the first task instead of
running the tools again.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from a2a.server.context import ServerCallContext
from a2a.types import Role, Task

from node.store.ids import id_problem


def creating_message_id(task: Task) -> str | None:
    """The id of the user message that created ``task`` (``history[0]``), if it has a valid one."""
    if not task.history:
        return None
    first = task.history[0]
    message_id: str = first.message_id
    if first.role != Role.ROLE_USER or not message_id or id_problem(message_id):
        return None
    return message_id


@runtime_checkable
class SendIndex(Protocol):
    """A store that finds the task a message created."""

    async def find_by_message(
        self, message_id: str, context: ServerCallContext, *, since_ns: int
    ) -> Task | None:
        """The caller's newest task created by ``message_id`` at or after ``since_ns``."""
        ...
