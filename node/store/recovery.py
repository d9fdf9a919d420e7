"""Restart recovery: *orphaned* tasks (a dead process was running them) become FAILED.

A node that restarts cannot resume a task that was SUBMITTED or WORKING (its executor coroutine
died with the process): such a task is orphaned, and each one, of every owner, is set to FAILED
with an agent message carrying the reason. INPUT_REQUIRED and AUTH_REQUIRED tasks (A2A's
*interrupted* states, :data:`node.protocol.INTERRUPTED`) are left as they are: they wait for the
caller, and the next message continues them.
"""

from __future__ import annotations

import uuid
from typing import Protocol, runtime_checkable

from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import Message, Part, Role, Task, TaskState

RUNNING_STATES = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
DEFAULT_REASON = "node restarted"


@runtime_checkable
class RecoverableStore(Protocol):
    """A durable store that can fail its orphaned tasks in one pass."""

    async def fail_orphaned(self, reason: str = DEFAULT_REASON) -> int: ...


def failed_task(task: Task, reason: str) -> Task:
    """A copy of ``task`` in FAILED with ``reason`` as its agent status message, stamped now.

    The previous status message, if any, moves into history (as the SDK's TaskManager does).
    """
    failed = Task()
    failed.CopyFrom(task)
    if failed.status.HasField("message"):
        failed.history.append(failed.status.message)
    failed.status.Clear()
    failed.status.state = TaskState.TASK_STATE_FAILED
    failed.status.message.CopyFrom(
        Message(
            message_id=uuid.uuid4().hex,
            task_id=task.id,
            context_id=task.context_id,
            role=Role.ROLE_AGENT,
            parts=[Part(text=reason)],
        )
    )
    failed.status.timestamp.GetCurrentTime()
    return failed


async def fail_orphaned(store: TaskStore, reason: str = DEFAULT_REASON) -> int:
    """Fail every SUBMITTED/WORKING task of ``store``; returns how many were failed.

    An :class:`InMemoryTaskStore` starts empty after a restart, so there is nothing to do.
    """
    if isinstance(store, RecoverableStore):
        return await store.fail_orphaned(reason)
    if isinstance(store, InMemoryTaskStore):
        return 0
    raise TypeError(f"{type(store).__name__} cannot fail orphaned tasks")
