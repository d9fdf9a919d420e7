"""Terminal states are final in the store itself, whatever process writes.

A save that would change a task stored COMPLETED, FAILED, CANCELED or REJECTED is refused: in SQL
by ``INSERT … ON CONFLICT DO UPDATE … WHERE <table>.state NOT IN (terminal) OR <table>.data =
excluded.data`` (so a byte-identical re-save is still accepted), in memory by the same comparison.
This closes the multi-replica overwrites seen on a shared PostgreSQL store: a task FAILED by a
restarting replica later COMPLETED by the one that ran it, a task CANCELED through one replica
COMPLETED by the other, a completed task re-run by a late message.

A refused save raises :class:`TerminalTaskError`, a subclass of the SDK's
``ConcurrentTaskModificationError``. That is the error the a2a-sdk's request handler already
handles for "another writer advanced this task": its event consumer reloads the task, finds it
terminal, hands that stored task to the waiting caller (a blocking send returns it, a stream gets
it as its last event), cancels the executor and ends the request. So the caller learns the real
final state, nothing stored is lost, and the executor stops instead of running on for nothing.
A save error of any other type would instead fail the request with -32603 and try to write FAILED.
"""

from __future__ import annotations

from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.types import Task, TaskState

from node.protocol import TERMINAL

TERMINAL_STATES_SQL = ", ".join(str(int(s)) for s in sorted(TERMINAL))
"""The terminal states as an SQL list, e.g. ``state NOT IN (3, 4, 5, 6)``."""


class TerminalTaskError(ConcurrentTaskModificationError):
    """A save was refused because the stored task is already in a terminal state."""

    def __init__(self, task_id: str, new_state: int | None = None) -> None:
        super().__init__(task_id)
        shown = f" (the refused save was {TaskState.Name(new_state)})" if new_state else ""
        self.args = (f"task {task_id} is in a terminal state; it cannot change{shown}",)


def refuses(stored: Task | None, new: Task) -> bool:
    """Whether saving ``new`` over ``stored`` must be refused (stored terminal, ``new`` differs)."""
    return stored is not None and stored.status.state in TERMINAL and stored != new
