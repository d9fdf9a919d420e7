"""NodeRequestHandler: the SDK's request handler with idempotent sends and final terminal states.

``SendMessage`` and ``SendStreamingMessage`` (JSON-RPC and REST alike: both routes call these two
entry points) are idempotent per (owner, ``messageId``):

- A message whose id created a task in the last ``send_window_s`` seconds (default 24 h) returns
  that task instead of creating a second one and running its tools again: the store finds it
  through :meth:`~node.store.sends.SendIndex.find_by_message` (durable on SQLite and
  PostgreSQL, so it works after a restart and from another replica; a bounded map in memory).
- A follow-up (``taskId`` set) whose ``messageId`` is already in the task's history does not run
  again either.
- Two identical sends in flight in one process produce one task: the second waits for the first
  (until its task exists for a stream, until it returns for a blocking send) and then answers as a
  retry. Across replicas only the store lookup dedups, so two copies arriving at two replicas
  within the same few milliseconds can still both run.

A retry answers with the task's current state, shaped like the call it repeats: a blocking send
waits, like the first one, until the task is terminal or interrupted when it is running on this
replica (otherwise, and with ``returnImmediately``, it returns the stored state); a stream sends
the current task as its first event, then the live events while the task runs on this replica,
else just that snapshot. The same ``messageId`` with different parts (or another ``contextId``)
is refused with -32602.

A message to a task in a terminal state is refused with -32004 "task is in a terminal state" on
every replica (the SDK checks only when it has no live copy of the task in this process), and
the stores refuse any save that would change a terminal task (:mod:`node.store.terminal`). The
message's ids are checked against :mod:`node.store.ids` before anything runs (-32602), so is its
role (only ``ROLE_USER`` starts or continues a task: -32602), and a push configuration sent to a
node that does not push is refused (-32003) rather than silently dropped.

With ``lean_path=True`` a new blocking send to cheap inline tools is served by
:class:`~node.server.lean_path.LeanPath` (same task, one save, no SDK event machinery), and so is
one to peers (saved WORKING first, then terminal); every other send, and every one it declines,
goes to the SDK handler. While a lean task's peer calls run, CancelTask, a cancel through another
replica, SubscribeToTask (the current task, then the final one) and a retried send reach it here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from a2a.server.agent_execution import AgentExecutor
from a2a.server.cluster.event_stream import TaskEventStream
from a2a.server.cluster.task_store import VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.owner_resolver import resolve_user_scope
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.request_handler import validate, validate_request_params
from a2a.server.tasks import TaskStore
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length

from node.executor import SETTLED_ONLY, NodeExecutor
from node.protocol import INTERRUPTED, TERMINAL
from node.server.lean_path import LeanPath, LeanRun
from node.store.ids import check_id
from node.store.sends import SendIndex
from node.store.terminal import TerminalTaskError
from node.store.versioned import VersionedStore

DEFAULT_SEND_WINDOW_S = 24 * 3600.0
SETTLED = TERMINAL | INTERRUPTED
Key = tuple[str, str]


class _Claim:
    """One in-flight send of a (owner, messageId); later copies wait until it is released."""

    def __init__(self, table: dict[Key, asyncio.Event], key: Key) -> None:
        self._table, self._key = table, key
        self._done = asyncio.Event()
        table[key] = self._done

    def release(self) -> None:
        if self._table.get(self._key) is self._done:
            del self._table[self._key]
        self._done.set()


def _ends_stream(event: Event) -> bool:
    """Whether ``event`` is the last one a send's stream carries."""
    if isinstance(event, Message):
        return True
    return isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state in SETTLED


def _check_same(seen: Message, message: Message, task: Task) -> None:
    """``InvalidParamsError`` unless ``message`` repeats ``seen`` (same parts, same context)."""
    if seen.parts != message.parts or (
        message.context_id and message.context_id != task.context_id
    ):
        raise InvalidParamsError(
            f"messageId {message.message_id} was already used by a different message"
        )


class NodeRequestHandler(DefaultRequestHandler):
    """``DefaultRequestHandler`` whose sends are idempotent per (owner, messageId).

    ``send_window_s`` is how long a message id keeps naming the task it created.
    """

    def __init__(
        self,
        agent_executor: AgentExecutor,
        task_store: TaskStore | VersionedStore,
        agent_card: AgentCard,
        *,
        send_window_s: float = DEFAULT_SEND_WINDOW_S,
        lean_path: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            agent_executor=agent_executor, task_store=task_store, agent_card=agent_card, **kwargs
        )
        if send_window_s <= 0:
            raise ValueError("send_window_s must be greater than 0")
        self.send_window_s = send_window_s
        # The cluster seam (node.store.cluster): the SDK writes through the versioned view, the
        # idempotency checks and the lean path use the plain store under it.
        plain = task_store.store if isinstance(task_store, VersionedStore) else task_store
        self._tasks: TaskStore = plain
        self._owner_of = getattr(plain, "owner_resolver", resolve_user_scope)
        self._in_flight: dict[Key, asyncio.Event] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self.lean: LeanPath | None = None
        if (
            lean_path
            and isinstance(agent_executor, NodeExecutor)
            and not isinstance(plain, VersionedTaskStore)
        ):
            stream = kwargs.get("event_stream")
            self.lean = LeanPath(
                agent_executor,
                plain,
                agent_card,
                self._request_context_builder,
                versioned=task_store if isinstance(task_store, VersionedTaskStore) else None,
                stream=stream if isinstance(stream, TaskEventStream) else None,
                check_input_modes=self._validate_input_modes,
            )

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        """Send a message; a retry of an earlier send returns that send's task."""
        config = params.configuration
        if not (config.return_immediately or config.HasField("task_push_notification_config")):
            context.state[SETTLED_ONLY] = True  # the executor may skip an instant WORKING update
        claim = await self._claim(params, context)
        try:
            prior = await self._prior(params, context)
            if prior is None:
                lean = await self.lean.send(params, context) if self.lean else None
                if lean is not None:
                    return lean
                result: Message | Task = await super().on_message_send(params, context)
                return result
        finally:
            claim.release()
        if not params.configuration.return_immediately:
            prior = await self._settled(prior, context)
        return apply_history_length(prior, params.configuration)

    @validate_request_params
    @validate(
        lambda self: self._agent_card.capabilities.streaming,
        "Streaming is not supported by the agent",
    )
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """Stream a send; a retry streams the earlier send's task (snapshot, then live)."""
        claim = await self._claim(params, context)
        try:
            prior = await self._prior(params, context)
            if prior is None:
                async with aclosing(super().on_message_send_stream(params, context)) as events:
                    async for event in events:
                        claim.release()  # the task is stored: a copy now finds it
                        yield event
                return
            claim.release()
            async for event in self._follow(prior, params, context):
                yield event
        finally:
            claim.release()

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        """Cancel a task; one that another replica finished meanwhile is not cancelable (-32002)."""
        run = await self._lean_run(params.id, context)
        if run is not None and self.lean is not None:
            return await self.lean.cancel(run, context)
        try:
            task: Task | None = await super().on_cancel_task(params, context)
        except TerminalTaskError as exc:
            raise TaskNotCancelableError(message=str(exc)) from exc
        return task

    def stop_canceled(self, task_id: str) -> None:
        """Another replica canceled ``task_id``: stop its executor and tools if it runs here.

        The store already holds CANCELED (final), so the executor's next save is refused either
        way; this makes the stop immediate instead of waiting for that save.
        """
        if self.lean is not None and self.lean.stop(task_id):
            return
        stop = asyncio.get_running_loop().create_task(self._stop_canceled(task_id))
        self._stopping.add(stop)
        stop.add_done_callback(self._stopping.discard)

    @validate_request_params
    @validate(
        lambda self: self._agent_card.capabilities.streaming,
        "Streaming is not supported by the agent",
    )
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """Subscribe; a lean task running here streams its current state, then its final one."""
        run = await self._lean_run(params.id, context)
        if run is None:
            async with aclosing(super().on_subscribe_to_task(params, context)) as events:
                async for event in events:
                    yield event
            return
        stored = await self._tasks.get(params.id, context)
        if stored is None:  # pragma: no cover - _lean_run read it a moment ago
            raise TaskNotFoundError
        yield stored
        yield await self._outcome(run, stored, context)

    async def aclose(self) -> None:
        """Stop lean runs still going, then drain the SDK's active tasks."""
        if self.lean is not None:
            await self.lean.aclose()
        await super().aclose()

    async def _lean_run(self, task_id: str, context: ServerCallContext) -> LeanRun | None:
        """The lean run of the caller's live task ``task_id`` in this process, if any."""
        run = self.lean.running(task_id) if self.lean is not None else None
        if run is None:
            return None
        stored = await self._tasks.get(task_id, context)  # owner-scoped, as every read
        if stored is None or stored.status.state in TERMINAL:
            return None
        return run

    async def _outcome(self, run: LeanRun, task: Task, context: ServerCallContext) -> Task:
        """A lean run's terminal task; the stored state if it ended in an error."""
        try:
            return await run.outcome()
        except Exception:
            return await self._tasks.get(task.id, context) or task

    async def _stop_canceled(self, task_id: str) -> None:
        active = await self._active_task_registry.get(task_id)
        if active is None or active.is_finished:
            return
        # ActiveTask.cancel needs the task owner's context: the one its request runs under.
        context = active._task_manager._call_context
        if context is None:
            return
        with contextlib.suppress(Exception):  # it ended meanwhile: nothing to stop
            await active.cancel(context)

    # -- retries ----------------------------------------------------------------------------

    async def _claim(self, params: SendMessageRequest, context: ServerCallContext) -> _Claim:
        """Check the message's ids, wait for an identical send in flight here, then claim."""
        message = params.message
        if message.role != Role.ROLE_USER:
            raise InvalidParamsError("message.role must be ROLE_USER")
        for index, part in enumerate(message.parts):
            if part.HasField("text") and not part.text:
                raise InvalidParamsError(f"message.parts[{index}].text is empty")
        if params.configuration.HasField("task_push_notification_config") and not (
            self._agent_card.capabilities.push_notifications
        ):
            raise PushNotificationNotSupportedError(
                message="this node does not send push notifications"
            )
        check_id(message.message_id, "message.messageId")
        check_id(message.context_id, "message.contextId")
        check_id(message.task_id, "message.taskId")
        for task_id in message.reference_task_ids:
            check_id(task_id, "message.referenceTaskIds")
        key = (self._owner_of(context), message.message_id)
        while (busy := self._in_flight.get(key)) is not None:
            await busy.wait()
        return _Claim(self._in_flight, key)

    async def _prior(self, params: SendMessageRequest, context: ServerCallContext) -> Task | None:
        """The task an earlier delivery of this message created or continued, if any.

        Raises ``UnsupportedOperationError`` for a new message to a terminal task.
        """
        message = params.message
        if message.task_id:
            task = await self._tasks.get(message.task_id, context)
            if task is None:
                return None  # the SDK answers task not found
            for seen in task.history:
                if seen.role == Role.ROLE_USER and seen.message_id == message.message_id:
                    _check_same(seen, message, task)
                    return task
            if task.status.state in TERMINAL:
                raise UnsupportedOperationError(
                    message=f"Task {task.id} is in a terminal state: "
                    f"{TaskState.Name(task.status.state)}"
                )
            return None
        if not message.message_id or not isinstance(self._tasks, SendIndex):
            return None
        since_ns = time.time_ns() - int(self.send_window_s * 1e9)
        task = await self._tasks.find_by_message(message.message_id, context, since_ns=since_ns)
        if task is not None:
            _check_same(task.history[0], message, task)
        return task

    async def _settled(self, task: Task, context: ServerCallContext) -> Task:
        """``task`` once terminal or interrupted if it runs here, else as stored now."""
        if task.status.state in SETTLED:
            return task
        run = await self._lean_run(task.id, context)
        if run is not None:
            return await self._outcome(run, task, context)
        active = await self._active_task_registry.get(task.id)
        if active is None:
            return task
        # Finished meanwhile (UnsupportedOperationError) or failed: the store has the outcome.
        with contextlib.suppress(Exception):
            async with aclosing(
                active.subscribe(include_initial_task=True, replace_status_update_with_task=True)
            ) as events:
                async for event in events:
                    if isinstance(event, Task) and event.status.state in SETTLED:
                        return event
        return await self._tasks.get(task.id, context) or task

    async def _follow(
        self, task: Task, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        """The current task, then its live events while it runs on this replica."""
        config = params.configuration
        active = None
        run = None if task.status.state in SETTLED else await self._lean_run(task.id, context)
        if run is not None:
            yield apply_history_length(task, config)
            yield apply_history_length(await self._outcome(run, task, context), config)
            return
        if task.status.state not in SETTLED:
            active = await self._active_task_registry.get(task.id)
        if active is not None:
            yielded = False
            try:
                async with aclosing(active.subscribe(include_initial_task=True)) as events:
                    async for event in events:
                        yielded = True
                        yield (
                            apply_history_length(event, config)
                            if isinstance(event, Task)
                            else event
                        )
                        if _ends_stream(event):
                            return
            except UnsupportedOperationError:
                if yielded:
                    raise
            if yielded:
                return
            task = await self._tasks.get(task.id, context) or task
        yield apply_history_length(task, config)
