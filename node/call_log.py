"""The calls a task made: one record per tool call, for the console's timeline and ``watch``.

The executor gives each task a :class:`CallLog` (on its :class:`ToolContext`); every
:class:`~node.tooling.runner.ToolRunner` that runs a call of the task (the executor's, a
pipeline's, the model planner's) opens a record when the call starts and closes it when the call
ends. A peer skill's call notes the peer's task id (:func:`note_remote_task`, called by the peer
client). :class:`CallsUpdater` writes the closed records into the metadata of every status update
of the task (key :data:`CALLS_KEY`), so the final task and the working updates carry them:

    {"tool": str, "peer": str | None, "remote_task_id": str | None,
     "started_at": "<RFC 3339 UTC>", "duration_ms": float, "outcome": "ok" | "error",
     "error": str | None, "trace_id": str | None}
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from a2a.server.tasks import TaskUpdater
from a2a.types import Message, TaskState
from google.protobuf.struct_pb2 import ListValue, Struct

from node.observability.tracing import current_trace_id

__all__ = ["CALLS_KEY", "CallLog", "CallsUpdater", "OpenCall", "calls_of", "note_remote_task"]

CALLS_KEY = "a2a_node_calls"
MAX_ERROR_CHARS = 500
MAX_RECORDS = 200  # a task's log is bounded: later calls are counted, not recorded
PEER_GROUP = "peer:"  # a peer skill's tool policy group is "peer:<agent id>"

_current: contextvars.ContextVar[OpenCall | None] = contextvars.ContextVar(
    "a2a_node_call", default=None
)


@dataclass(slots=True)
class OpenCall:
    """A call that has started: its tool, peer, wall-clock start and monotonic start."""

    tool: str
    peer: str | None
    started_at: str
    start: float
    trace_id: str | None
    remote_task_id: str | None = None


class CallLog:
    """The records of one task's calls, in the order they ended."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.wire = ListValue()  # the records as protobuf, each converted once (not per update)
        self.dropped = 0

    def open(self, tool: str, group: str | None = None) -> OpenCall:
        """A call of ``tool`` starts now; ``group`` is its policy group (``peer:<id>``: a peer)."""
        peer = group[len(PEER_GROUP) :] if group and group.startswith(PEER_GROUP) else None
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return OpenCall(tool, peer, now, time.perf_counter(), current_trace_id())

    def close(self, call: OpenCall, *, ok: bool, error: str | None = None) -> None:
        """The call ended: its record joins the log."""
        if len(self.records) >= MAX_RECORDS:
            self.dropped += 1
            return
        record = {
            "tool": call.tool,
            "peer": call.peer,
            "remote_task_id": call.remote_task_id,
            "started_at": call.started_at,
            "duration_ms": round((time.perf_counter() - call.start) * 1000, 3),
            "outcome": "ok" if ok else "error",
            "error": None if ok else (error or "")[:MAX_ERROR_CHARS],
            "trace_id": call.trace_id,
        }
        self.records.append(record)
        self.wire.values.add().struct_value.update(record)


@contextlib.contextmanager
def current_call(call: OpenCall | None) -> Iterator[None]:
    """While the block runs, :func:`note_remote_task` annotates ``call``."""
    if call is None:
        yield
        return
    token = _current.set(call)
    try:
        yield
    finally:
        _current.reset(token)


def note_remote_task(task_id: str) -> None:
    """The peer named its task ``task_id`` for the call running here (if one is recorded)."""
    call = _current.get()
    if call is not None and task_id:
        call.remote_task_id = task_id


class CallsUpdater(TaskUpdater):
    """A ``TaskUpdater`` whose status updates carry the task's call records in their metadata."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = CallLog()

    async def update_status(
        self,
        state: TaskState,
        message: Message | None = None,
        timestamp: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if self.calls.records:  # a Struct: the records are not converted again on each update
            wire = Struct()
            if metadata:
                wire.update(metadata)
            wire.fields[CALLS_KEY].list_value.CopyFrom(self.calls.wire)
            metadata = cast(Any, wire)  # the event's constructor takes a Struct as well as a dict
        await super().update_status(state, message, timestamp, metadata)


def calls_of(updater: TaskUpdater) -> CallLog | None:
    """The call log of a task's updater, when it keeps one."""
    return updater.calls if isinstance(updater, CallsUpdater) else None
