"""``a2a-node watch`` (and ``send --follow``): a task's live progress and the calls it makes.

What is shown comes from the task's events (SubscribeToTask, or the stream of a send): its state,
its status messages, and the calls it made — the ``a2a_node_calls`` list the node puts in the
metadata of its working status updates and of the final task (tool, peer, remote task, duration,
outcome, error). On a terminal the display is a live ``rich`` panel on stderr; anywhere else (a
pipe, a file, a test) it is plain lines, one per change, in a fixed format::

    task 0f3c…: working
      … running compute
      call data__calculate → data (remote task 9ab1…): ok in 31 ms
      call data__calculate → data: error in 12 ms: division by zero

At the end the task is printed as ``get`` prints it (results on stdout) and the exit code is
:func:`~node.cli.output.task_exit_code`'s: 0 completed, 3 completed with failed batch calls,
1 anything else (failed, rejected, canceled, waiting for input).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from a2a.client.errors import A2AClientTimeoutError
from a2a.types import StreamResponse, SubscribeToTaskRequest, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from node.cli.common import RemoteError, add_client_options, add_json_option, token_of
from node.cli.output import print_task, state_name
from node.client import NodeClient, apply_event, status_text
from node.protocol import INTERRUPTED, TERMINAL

__all__ = ["CALLS_KEY", "Call", "TaskProgress", "add_watch_command", "calls_in", "watch_task"]

#: The metadata key under which a node lists the calls a task made: ``node.call_log.CALLS_KEY``,
#: repeated here because importing that module (the SDK's server side) would slow every command.
CALLS_KEY = "a2a_node_calls"
#: How many status messages the live panel keeps.
MESSAGES_SHOWN = 6
#: The pause before subscribing again after a stream ended with the task still running.
RESUBSCRIBE_PAUSE_S = 0.2


@dataclass(frozen=True, slots=True)
class Call:
    """One call a task made: a local tool, or a peer's skill (``peer`` set)."""

    tool: str
    peer: str | None
    remote_task_id: str | None
    started_at: str
    duration_ms: float
    outcome: str
    error: str | None

    @property
    def key(self) -> tuple[str, str, str | None, str | None]:
        return (self.tool, self.started_at, self.peer, self.remote_task_id)

    def line(self) -> str:
        """``data__calculate → data (remote task 9ab1): error in 12 ms: division by zero``."""
        text = self.tool
        if self.peer:
            text += f" → {self.peer}"
        if self.remote_task_id:
            text += f" (remote task {self.remote_task_id})"
        text += f": {self.outcome} in {duration(self.duration_ms)}"
        return f"{text}: {self.error}" if self.error else text


def duration(ms: float) -> str:
    """``31 ms`` below a second, ``1.25 s`` above."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def calls_in(metadata: Struct) -> list[Call]:
    """The calls listed under :data:`CALLS_KEY` in a task's or an update's metadata.

    Entries without the contract's shape (a node of another version) are left out, not fatal.
    """
    if CALLS_KEY not in metadata.fields:
        return []
    listed = MessageToDict(metadata).get(CALLS_KEY)
    calls = []
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str):
            continue
        took = entry.get("duration_ms")
        calls.append(
            Call(
                tool=entry["tool"],
                peer=_text(entry.get("peer")),
                remote_task_id=_text(entry.get("remote_task_id")),
                started_at=str(entry.get("started_at") or ""),
                duration_ms=float(took) if isinstance(took, int | float) else 0.0,
                outcome=str(entry.get("outcome") or "?"),
                error=_text(entry.get("error")),
            )
        )
    return calls


@dataclass
class TaskProgress:
    """What is known of a watched task, and its display (live panel or plain lines)."""

    live: bool = False
    task: Task = field(default_factory=Task)
    messages: list[str] = field(default_factory=list)
    calls: dict[tuple[str, str, str | None, str | None], Call] = field(default_factory=dict)
    _shown_state: int = TaskState.TASK_STATE_UNSPECIFIED
    _started: float = field(default_factory=time.monotonic)

    # -- folding events ------------------------------------------------------------------

    def event(self, event: StreamResponse) -> None:
        """Fold one stream event (a task snapshot, a status or an artifact update)."""
        if event.HasField("task"):
            self.snapshot(event.task)
            return
        self.task = apply_event(self.task, event)
        if event.HasField("status_update"):
            self._note(status_text(self.task), calls_in(event.status_update.metadata))

    def snapshot(self, task: Task) -> None:
        """A whole task (``GetTask``, the stream's first event): it replaces what was known."""
        self.task = task
        self._note(status_text(task), calls_in(task.metadata))

    def _note(self, message: str, calls: list[Call]) -> None:
        state = self.task.status.state
        final = state in TERMINAL | INTERRUPTED
        if state != self._shown_state and not final:
            self._plain(f"task {self.task.id}: {state_name(state)}")
        self._shown_state = state
        for call in calls:
            if call.key not in self.calls:
                self.calls[call.key] = call
                self._plain(f"  call {call.line()}")
        text = message or ("working" if state == TaskState.TASK_STATE_WORKING else "")
        if text and not final and (not self.messages or self.messages[-1] != text):
            self.messages.append(text)
            self._plain(f"  … {text}")

    def _plain(self, line: str) -> None:
        if not self.live:
            print(line, file=sys.stderr, flush=True)

    # -- the live panel ------------------------------------------------------------------

    def __rich__(self) -> RenderableType:
        state = self.task.status.state
        elapsed = f"{time.monotonic() - self._started:.1f} s"
        title = f"task {self.task.id or '…'}"
        head: RenderableType
        if state in TERMINAL | INTERRUPTED:
            style = "green" if state == TaskState.TASK_STATE_COMPLETED else "red"
            head = Text.assemble((state_name(state), f"bold {style}"), f"  after {elapsed}")
        else:
            label = state_name(state) if self.task.id else "connecting"
            head = Spinner("dots", text=Text(f"{label}  {elapsed}"), style="cyan")
        parts: list[RenderableType] = [head]
        parts += [Text(f"… {m}", style="dim") for m in self.messages[-MESSAGES_SHOWN:]]
        if state in TERMINAL | INTERRUPTED and status_text(self.task):
            parts.append(Text(status_text(self.task), style="bold"))
        if self.calls:
            parts.append(self._calls_table())
        return Panel(Group(*parts), title=title, title_align="left")

    def _calls_table(self) -> Table:
        calls = sorted(self.calls.values(), key=lambda c: c.started_at)
        peers = any(c.peer for c in calls)  # the peer columns only when a peer was called
        table = Table(box=None, pad_edge=False, header_style="bold")
        table.add_column("CALL")
        if peers:
            table.add_column("PEER")
            table.add_column("REMOTE TASK")
        table.add_column("TIME", justify="right")
        table.add_column("OUTCOME")
        table.add_column("ERROR")
        for call in calls:
            where = [call.peer or "", call.remote_task_id or ""] if peers else []
            outcome = Text(call.outcome, style="green" if call.outcome == "ok" else "red")
            table.add_row(call.tool, *where, duration(call.duration_ms), outcome, call.error or "")
        return table


@contextmanager
def progress_display() -> Iterator[TaskProgress]:
    """A :class:`TaskProgress` drawn live on stderr when it is a terminal, else in plain lines."""
    console = Console(stderr=True)
    progress = TaskProgress(live=console.is_terminal)
    if not progress.live:
        yield progress
        return
    with Live(progress, console=console, refresh_per_second=8, transient=False):
        yield progress


def _done(task: Task) -> bool:
    return task.status.state in TERMINAL | INTERRUPTED


async def _subscribe(node: NodeClient, task_id: str) -> AsyncIterator[StreamResponse]:
    """The task's events until its stream ends; nothing when it ended meanwhile."""
    try:
        async for event in node.client.subscribe(SubscribeToTaskRequest(id=task_id)):
            yield event
    except UnsupportedOperationError:  # finished between GetTask and SubscribeToTask
        return
    except A2AClientTimeoutError:  # a quiet stretch longer than the read timeout
        return


async def watch_task(node: NodeClient, task_id: str, progress: TaskProgress) -> Task:
    """Follow the task to a terminal or interrupted state; the task as ``GetTask`` ends it.

    Streams with SubscribeToTask when the node's card says it streams, else polls ``GetTask``;
    a stream that ends while the task still runs (a restart, a proxy's idle timeout) is
    subscribed to again.
    """
    streams = bool(node.card.capabilities.streaming)
    while True:
        progress.snapshot(await node.get(task_id))
        if _done(progress.task):
            return progress.task
        if streams:
            async for event in _subscribe(node, task_id):
                progress.event(event)
                if _done(progress.task):
                    break
            if _done(progress.task):  # the stream's last event; GetTask has the final metadata
                continue
        await asyncio.sleep(RESUBSCRIBE_PAUSE_S)


async def _watch(args: argparse.Namespace) -> int:
    from node.cli.tasks import talking_to

    timer = asyncio.timeout(args.timeout)
    with progress_display() as progress:
        try:
            async with timer:
                with talking_to(args.url):
                    async with NodeClient.connect(
                        args.url, token=token_of(args), api_key=args.api_key, timeout=60.0
                    ) as node:
                        task = await watch_task(node, args.task_id, progress)
        except TimeoutError:
            if not timer.expired():
                raise
            state = state_name(progress.task.status.state) if progress.task.id else "unknown"
            raise RemoteError(
                f"gave up after {args.timeout:g}s: task {args.task_id} is {state}"
            ) from None
    return print_task(task, as_json=args.json, url=args.url)


def add_watch_command(sub: Any) -> None:
    """Register ``watch``."""
    p = sub.add_parser(
        "watch",
        help="show a task's live progress and the calls it makes, until it ends",
        description="Follow a running (or finished) task: its state, status messages and the "
        "calls it makes to tools and peers, live on a terminal, as plain lines otherwise. "
        "Exit codes: 0 completed, 1 not completed (failed, rejected, canceled, waiting for "
        "input) or unreachable, 3 a batch completed with failed calls.",
    )
    p.add_argument("url", help="the node's base URL or its card URL")
    p.add_argument("task_id", help="the task's id (as send --no-wait prints it)")
    p.add_argument("--timeout", type=float, help="give up after this many seconds (default: never)")
    add_json_option(p)
    add_client_options(p)
    p.set_defaults(run=lambda a: asyncio.run(_watch(a)))
