"""The lean path: a blocking ``SendMessage`` to cheap inline tools, without the SDK's events.

The SDK runs every task through an ``ActiveTask``: a producer and a consumer ``asyncio.Task``,
event queues with one task per sink, a ``TaskManager`` that saves the task after every event,
telemetry wrappers around all of it. For a call that finishes in microseconds that machinery is
~70 % of the server's CPU (``docs/architecture.md``, "Lean path"). This path serves such a call
with the same parts and nothing else:

1. the request qualifies: a new task (no ``taskId``), blocking (no ``returnImmediately``), no push
   configuration, no SDK spans being recorded;
2. the SDK's own request-context builder gives the task and context ids (as on the SDK path);
3. the executor admits and plans it (:meth:`NodeExecutor.prepare`: hops, skill, arguments,
   capabilities) and every planned call is a cheap inline tool (:func:`cheap_inline`);
4. the executor runs and reports it (:meth:`NodeExecutor.finish`) into a queue that folds each
   event into the task with the SDK's own ``TaskManager`` (as the SDK path's consumer does) but
   saves nothing;
5. the terminal task is saved once, then answered (``historyLength`` applied as the SDK does).

Anything else returns ``None`` before a tool has run, with the message as it came, and the caller
hands the request to the SDK handler unchanged: follow-ups, streams, push, free text, every
admission or planning error (rejections and input-required are built by the SDK path), calls to
tools that wait on I/O, threads or processes. The task is invisible while its calls run (they take
microseconds); a crash in that window loses a task nobody was told about.

Off with ``server.lean_path: false`` in the card or ``A2A_NODE_LEAN_PATH=0`` in the environment.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable

from a2a.server.agent_execution import RequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import TaskManager, TaskStore
from a2a.types import (
    AgentCard,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    Task,
)
from a2a.utils.input_mode_validator import validate_input_modes
from a2a.utils.task import apply_history_length, validate_history_length

from node.errors import ConfigError
from node.executor import NodeExecutor
from node.server.sdk_tuning import telemetry_active
from node.tooling import Tool
from node.tooling.function_tool import FunctionTool

LEAN_PATH_ENV = "A2A_NODE_LEAN_PATH"
_ON, _OFF = frozenset({"1", "true", "on", "yes"}), frozenset({"0", "false", "off", "no"})


def lean_path_enabled(card_setting: bool) -> bool:
    """The card's ``server.lean_path``, unless ``A2A_NODE_LEAN_PATH`` says otherwise."""
    value = os.environ.get(LEAN_PATH_ENV, "").strip().lower()
    if not value:
        return card_setting
    if value in _ON | _OFF:
        return value in _ON
    raise ConfigError(f"{LEAN_PATH_ENV} must be 1/true/on or 0/false/off, not {value!r}")


def cheap_inline(tool: Tool) -> bool:
    """A call the lean path may run: a read-only sync function its policy puts on the loop.

    ``isolation="inline"`` on a sync function is the tool's promise that it returns in
    microseconds; async tools are inline too but may wait on I/O, so they take the SDK path.
    """
    return (
        isinstance(tool, FunctionTool)
        and tool.inline
        and tool.read_only
        and not inspect.iscoroutinefunction(tool.function)
    )


class _Scratch(TaskStore):
    """Where the folding ``TaskManager`` "saves": nowhere (the path saves the final task once)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        return None

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return None

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return ListTasksResponse()

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        return None


_SCRATCH = _Scratch()


class _FoldingQueue(EventQueue):
    """The executor's event queue on the lean path: each event folds into the task at once."""

    def __init__(self, manager: TaskManager) -> None:
        self._manager = manager

    async def enqueue_event(self, event: Event) -> None:
        if isinstance(event, Message):  # pragma: no cover - the node's executor never answers so
            raise TypeError("the lean path runs task-mode executors only")
        await self._manager.save_task_event(event)


class LeanPath:
    """Serves qualifying blocking sends (module doc); :meth:`send` returns None for the rest."""

    def __init__(
        self,
        executor: NodeExecutor,
        store: TaskStore,
        agent_card: AgentCard,
        context_builder: RequestContextBuilder,
        *,
        check_input_modes: bool = False,
        eligible: Callable[[Tool], bool] = cheap_inline,
    ) -> None:
        self._executor = executor
        self._store = store
        self._card = agent_card
        self._builder = context_builder
        self._check_input_modes = check_input_modes
        self._eligible = eligible

    @staticmethod
    def qualifies(params: SendMessageRequest) -> bool:
        """A new blocking task without push configuration (the shape this path can serve)."""
        config = params.configuration
        return not (
            params.message.task_id
            or config.return_immediately
            or config.HasField("task_push_notification_config")
        )

    async def send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | None:
        """The terminal task, saved; or None (nothing ran, the message unchanged) for the SDK."""
        if not self.qualifies(params) or telemetry_active():
            return None
        validate_history_length(params.configuration)  # same checks, same errors as the SDK's
        if self._check_input_modes:
            validate_input_modes(params.message, self._card)
        message = params.message
        context_id = message.context_id
        request = await self._builder.build(
            params=params, task_id=None, context_id=context_id or None, task=None, context=context
        )
        assert request.task_id and request.context_id
        manager = TaskManager(_SCRATCH, context, request.task_id, request.context_id, message)
        try:
            task, updater = await self._executor.begin(request, _FoldingQueue(manager))
            prepared = self._executor.prepare(request, task, updater)
        except Exception:  # rejections, input-required, unusable messages: the SDK path's
            prepared = None
        if prepared is None or not all(self._eligible(ready.tool) for _, ready in prepared.calls):
            message.task_id, message.context_id = "", context_id  # as it came
            return None
        await self._executor.finish(prepared, task, updater)
        final = await manager.get_task()
        assert final is not None
        await self._store.save(final, context)
        return apply_history_length(final, params.configuration)
