"""The lean path: a blocking ``SendMessage`` to cheap inline tools or peers, no SDK events.

The SDK runs every task through an ``ActiveTask``: a producer and a consumer ``asyncio.Task``,
event queues with one task per sink, a ``TaskManager`` that saves the task after every event,
telemetry wrappers around all of it. For a call that finishes in microseconds that machinery is
~70 % of the server's CPU (``docs/architecture.md``, "Lean path"); for a peer hop it is a quarter
of the coordinator's. This path serves such a call with the same parts and nothing else:

1. the request qualifies: a new task (no ``taskId``), blocking (no ``returnImmediately``), no push
   configuration, no SDK spans being recorded;
2. the SDK's own request-context builder gives the task and context ids (as on the SDK path);
3. the executor admits and plans it (:meth:`NodeExecutor.prepare`: hops, skill, arguments,
   capabilities) and every planned call is a cheap inline tool (:func:`runs_instantly`) or a call
   that waits on I/O this path can follow (:func:`waits_on_peers`: a peer's skill, a pipeline of
   such calls and cheap inline tools);
4. the executor runs and reports it (:meth:`NodeExecutor.finish`) into a queue that folds each
   event into the task with the SDK's own ``TaskManager`` (as the SDK path's consumer does) but
   saves nothing;
5. the terminal task is saved once, then answered (``historyLength`` applied as the SDK does).

Cheap inline calls only: the task is invisible while its calls run (microseconds); a crash in
that window loses a task nobody was told about. Calls that wait on I/O (seconds, maybe) get a
:class:`LeanRun` instead: the task is saved once as WORKING at the executor's first WORKING status
(through the versioned store when there is one: compare-and-set, an event row, the PostgreSQL
lease, so GetTask, ListTasks, a retried ``messageId``, lease expiry and restart recovery see it as
any WORKING task); when every planned call is read-only (peer skills are) the calls go out at
once and that save is made only if they still run :data:`VISIBLE_AFTER_S` later (beside them; a
quick hop is saved once, terminal; until then nobody knows the task's id, and a crash leaves no
task and no answer while the calls sent changed nothing), else it is made before they run. The
calls run in their own ``asyncio.Task`` (a caller that goes away does not stop them); the
terminal task is saved, after any WORKING save, with the same compare-and-set (refused if a
cancel came first). While it
runs, :meth:`LeanPath.cancel` (CancelTask here) stops the calls and stores CANCELED as the SDK's
``ActiveTask.cancel`` does, :meth:`LeanPath.stop` (a cancel through another replica) stops them,
and :meth:`LeanRun.outcome` is what SubscribeToTask and a retried send wait for: the final task
only, no intermediate events.

Anything else returns ``None`` before a tool has run, with the message as it came, and the caller
hands the request to the SDK handler unchanged: follow-ups, streams, push, free text, every
admission or planning error (rejections and input-required are built by the SDK path), calls to
other tools (threads, processes, async tools, MCP).

Off with ``server.lean_path: false`` in the card or ``A2A_NODE_LEAN_PATH=0`` in the environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from a2a.server.agent_execution import RequestContext, RequestContextBuilder
from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import TaskManager, TaskStore, TaskUpdater
from a2a.types import (
    AgentCard,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotCancelableError
from a2a.utils.input_mode_validator import validate_input_modes
from a2a.utils.task import apply_history_length, validate_history_length

from node.errors import ConfigError
from node.executor import NodeExecutor, Prepared, runs_instantly
from node.peers.remote_tool import RemoteSkillTool
from node.pipeline.tool import PipelineTool
from node.server.sdk_tuning import telemetry_active
from node.store.terminal import TerminalTaskError
from node.tooling import Tool

LEAN_PATH_ENV = "A2A_NODE_LEAN_PATH"
VISIBLE_AFTER_S = 0.05
"""Read-only calls still running after this long get their WORKING save; quicker ones are saved
once, terminal (a coordinator's hop: one compare-and-set instead of two)."""
_ON, _OFF = frozenset({"1", "true", "on", "yes"}), frozenset({"0", "false", "off", "no"})


def lean_path_enabled(card_setting: bool) -> bool:
    """The card's ``server.lean_path``, unless ``A2A_NODE_LEAN_PATH`` says otherwise."""
    value = os.environ.get(LEAN_PATH_ENV, "").strip().lower()
    if not value:
        return card_setting
    if value in _ON | _OFF:
        return value in _ON
    raise ConfigError(f"{LEAN_PATH_ENV} must be 1/true/on or 0/false/off, not {value!r}")


def waits_on_peers(tool: Tool, _depth: int = 0) -> bool:
    """A call that waits on peers and nothing the lean path cannot follow.

    A peer's skill (:class:`RemoteSkillTool`), or a pipeline whose steps are all cheap inline
    tools, peer skills or such pipelines. A step whose tool is missing now is a peer's that went
    away (local steps are checked when the pipeline is built): it fails the step as on the SDK path.
    """
    if isinstance(tool, RemoteSkillTool):
        return True
    if not isinstance(tool, PipelineTool) or _depth > 8:
        return False
    catalog = tool._catalog
    for step in tool.spec.steps:
        found = catalog.get(step.tool)
        if found is not None and not (runs_instantly(found) or waits_on_peers(found, _depth + 1)):
            return False
    return True


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
    """The executor's event queue on the lean path: each event folds into the task at once.

    ``on_working``, when set, is awaited once, after the first WORKING status has folded.
    """

    def __init__(self, manager: TaskManager) -> None:
        self._manager = manager
        self.on_working: Callable[[TaskStatusUpdateEvent], Awaitable[None]] | None = None

    async def enqueue_event(self, event: Event) -> None:
        if isinstance(event, Message):  # pragma: no cover - the node's executor never answers so
            raise TypeError("the lean path runs task-mode executors only")
        await self._manager.save_task_event(event)
        hook = self.on_working
        if (
            hook is not None
            and isinstance(event, TaskStatusUpdateEvent)
            and event.status.state == TaskState.TASK_STATE_WORKING
        ):
            self.on_working = None
            await hook(event)


def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


@dataclass(eq=False)
class LeanRun:
    """A lean task whose calls wait on I/O: stored WORKING, its calls running in ``work``."""

    task_id: str
    context: ServerCallContext  # the sender's (its owner scopes every save)
    manager: TaskManager
    version: TaskVersion = TaskVersion.MISSING  # of the WORKING save, once done
    work: asyncio.Task[None] | None = None
    saving: asyncio.Task[None] | None = None  # the WORKING save, when it runs beside the calls
    reveal: asyncio.TimerHandle | None = None  # starts that save once the calls ran a while
    error: BaseException | None = None  # the WORKING save failed: the run stopped
    finishing: bool = False  # the calls are done: the terminal save is under way
    canceling: bool = False  # CancelTask here stores the outcome
    final: asyncio.Future[Task] = field(default_factory=lambda: _loop().create_future())

    async def outcome(self) -> Task:
        """The terminal task as stored (or a store error); the run goes on if the waiter leaves."""
        return await asyncio.shield(self.final)

    def settle(self, task: Task | None = None, error: BaseException | None = None) -> None:
        if self.final.done():
            return
        if error is not None:
            self.final.set_exception(error)
            self.final.exception()  # retrieved: a sender that went away leaves no warning
        else:
            assert task is not None
            self.final.set_result(task)


class LeanPath:
    """Serves qualifying blocking sends (module doc); :meth:`send` returns None for the rest.

    ``versioned`` and ``stream`` are the handler's cluster seam (SQL stores): a task whose calls
    wait on I/O is saved through ``versioned`` (compare-and-set, event rows) and each save is
    published on ``stream``; without them (memory) it is saved in ``store``.
    """

    def __init__(
        self,
        executor: NodeExecutor,
        store: TaskStore,
        agent_card: AgentCard,
        context_builder: RequestContextBuilder,
        *,
        versioned: VersionedTaskStore | None = None,
        stream: TaskEventStream | None = None,
        check_input_modes: bool = False,
        eligible: Callable[[Tool], bool] = runs_instantly,
        waits: Callable[[Tool], bool] = waits_on_peers,
    ) -> None:
        self._executor = executor
        self._store = store
        self._versioned = versioned
        self._stream = stream
        self._card = agent_card
        self._builder = context_builder
        self._check_input_modes = check_input_modes
        self._eligible = eligible
        self._waits = waits
        self._runs: dict[str, LeanRun] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._works: set[asyncio.Task[None]] = set()
        self._saves: set[asyncio.Task[None]] = set()

    @staticmethod
    def qualifies(params: SendMessageRequest) -> bool:
        """A new blocking task without push configuration (the shape this path can serve)."""
        config = params.configuration
        return not (
            params.message.task_id
            or config.return_immediately
            or config.HasField("task_push_notification_config")
        )

    def running(self, task_id: str) -> LeanRun | None:
        """The lean run of ``task_id`` in this process while its calls run (not owner-scoped)."""
        return self._runs.get(task_id)

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
        queue = _FoldingQueue(manager)
        try:
            task, updater = await self._executor.begin(request, queue)
            prepared = self._executor.prepare(request, task, updater)
        except Exception:  # rejections, input-required, unusable messages: the SDK path's
            prepared = None
        tools = [] if prepared is None else [ready.tool for _, ready in prepared.calls]
        waits = [self._waits(tool) for tool in tools]
        if prepared is None or not all(
            w or self._eligible(t) for t, w in zip(tools, waits, strict=True)
        ):
            message.task_id, message.context_id = "", context_id  # as it came
            return None
        if any(waits):
            run = LeanRun(task.id, context, manager)
            if all(tool.read_only for tool in tools):  # a rerun after a crash is harmless
                queue.on_working = lambda event: self._save_beside(run, event)
            else:
                queue.on_working = lambda event: self._first_save(run, event)
            run.work = asyncio.create_task(self._work(run, prepared, task, updater))
            self._works.add(run.work)  # the loop holds tasks weakly; a sender may hang up
            run.work.add_done_callback(self._works.discard)
            return apply_history_length(await run.outcome(), params.configuration)
        await self._executor.finish(prepared, task, updater)
        final = await manager.get_task()
        assert final is not None
        await self._store.save(final, context)
        return apply_history_length(final, params.configuration)

    # -- calls that wait on I/O ---------------------------------------------------------------

    async def _first_save(
        self, run: LeanRun, event: TaskStatusUpdateEvent, working: Task | None = None
    ) -> None:
        """The executor's first WORKING status, before its first call runs: store the task.

        From here the run is visible (GetTask, ListTasks, CancelTask, SubscribeToTask, retries).
        A store failure stops the run (the runner would only log an error raised here).
        """
        working = working or await run.manager.get_task()
        assert working is not None and run.work is not None
        try:
            run.version = await self._save(working, event, run.context, TaskVersion.MISSING)
        except Exception as exc:
            run.error = exc
            run.work.cancel()
            return
        self._runs[run.task_id] = run
        run.final.add_done_callback(lambda _: self._runs.pop(run.task_id, None))

    async def _save_beside(self, run: LeanRun, event: TaskStatusUpdateEvent) -> None:
        """The WORKING save of read-only calls: due :data:`VISIBLE_AFTER_S` from now, beside them.

        The calls go out at once. Calls done before it is due skip it (the task is saved once,
        terminal); else it starts then and commits while they run, and the terminal save waits
        for it. The task is visible from that commit on, as with :meth:`_first_save`. Until then
        nobody knows its id (the sender has no answer yet; ListTasks does not show it), and a
        crash leaves no task here and no answer to the sender: the calls it may have sent change
        nothing (read-only), so a retry is as good as the first send.
        """
        working = Task()
        working.CopyFrom(await run.manager.get_task())  # later events fold into the original

        def start() -> None:
            run.reveal = None
            run.saving = asyncio.create_task(self._first_save(run, event, working))
            self._saves.add(run.saving)
            run.saving.add_done_callback(self._saves.discard)

        if VISIBLE_AFTER_S <= 0:
            start()
        else:
            run.reveal = asyncio.get_running_loop().call_later(VISIBLE_AFTER_S, start)

    async def _work(
        self, run: LeanRun, prepared: Prepared, task: Task, updater: TaskUpdater
    ) -> None:
        try:
            await self._executor.finish(prepared, task, updater)
            run.finishing = True
            if run.reveal is not None:  # done before the WORKING save was due: none
                run.reveal.cancel()
                run.reveal = None
            if run.saving is not None:  # the WORKING save, when it ran beside the calls
                await asyncio.shield(run.saving)
                if run.error is not None:
                    raise run.error
            final = await run.manager.get_task()
            assert final is not None
            try:
                await self._save(final, final, run.context, run.version)
            except TerminalTaskError:  # canceled through another replica first: that stands
                final = await self._store.get(run.task_id, run.context) or final
            run.settle(final)
        except asyncio.CancelledError:  # CancelTask here, or through another replica, or closing:
            if run.error is not None:  # whoever stopped the run settles it, else:
                run.settle(error=run.error)
            elif not run.canceling:
                run.settle(error=RuntimeError("the task's calls were stopped"))
        except Exception as exc:  # a store failure: the sender gets the error (module doc)
            run.settle(error=exc)
        finally:
            if run.reveal is not None:  # stopped before the WORKING save was due: none
                run.reveal.cancel()

    async def _save(
        self, task: Task, event: Event, context: ServerCallContext, prev: TaskVersion
    ) -> TaskVersion:
        """Save through the versioned store (compare-and-set, event row, published) or plainly."""
        if self._versioned is None:
            await self._store.save(task, context)
            return prev
        version = await self._versioned.save(
            task, event=event, prev=None, prev_version=prev, context=context
        )
        if self._stream is not None:
            await self._stream.publish(task.id, VersionedEvent(event=event, version=version))
        return version

    async def cancel(self, run: LeanRun, context: ServerCallContext) -> Task:
        """CancelTask here: stop the calls, store CANCELED (as ``ActiveTask.cancel`` ends a task).

        ``TaskNotCancelableError`` when the calls are done (the task is ending, or ended).
        """
        if run.finishing or run.canceling or run.work is None or run.work.done():
            with contextlib.suppress(Exception):
                await run.outcome()
            raise TaskNotCancelableError
        run.canceling = True
        run.work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run.work  # the runner cancels and drains the calls (a peer is told to cancel)
        current = await run.manager.get_task()
        assert current is not None
        request = RequestContext(
            call_context=context, task_id=run.task_id, context_id=current.context_id, task=current
        )
        await self._executor.cancel(request, _FoldingQueue(run.manager))
        canceled = await run.manager.get_task()
        assert canceled is not None
        try:
            await self._save(canceled, canceled, run.context, run.version)  # CANCELED skips the
        except TerminalTaskError as exc:  # version check, never the terminal one
            stored = await self._store.get(run.task_id, run.context)
            run.settle(stored or canceled)
            raise TaskNotCancelableError from exc
        except Exception as exc:
            run.settle(error=exc)
            raise
        run.settle(canceled)
        return canceled

    def stop(self, task_id: str) -> bool:
        """Another replica stored CANCELED for ``task_id``: stop its calls if they run here.

        The sender then gets the stored task (CANCELED); False when no such run is here.
        """
        run = self._runs.get(task_id)
        if run is None or run.finishing or run.canceling or run.work is None:
            return False
        run.canceling = True
        run.work.cancel()
        follow = asyncio.get_running_loop().create_task(self._settle_stopped(run))
        self._stopping.add(follow)
        follow.add_done_callback(self._stopping.discard)
        return True

    async def _settle_stopped(self, run: LeanRun) -> None:
        assert run.work is not None
        with contextlib.suppress(asyncio.CancelledError):
            await run.work
        try:
            stored = await self._store.get(run.task_id, run.context)
        except Exception as exc:
            run.settle(error=exc)
            return
        run.settle(stored or await run.manager.get_task())

    async def aclose(self) -> None:
        """Stop the runs still going (shutdown): their tasks stay WORKING for recovery."""
        runs = list(self._runs.values())
        for run in runs:
            if run.work is not None and not run.finishing:
                run.canceling = True
                run.work.cancel()
        for run in runs:
            if run.work is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await run.work
            run.settle(error=RuntimeError("the node is shutting down"))
        for work in list(self._works):  # runs not stored yet settle themselves when stopped
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
        for follow in [*self._stopping, *self._saves]:  # a WORKING save still committing
            with contextlib.suppress(Exception):
                await follow
