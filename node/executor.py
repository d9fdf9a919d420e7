"""NodeExecutor: one A2A task, from message to terminal state, through planning and the tool runner.

Lifecycle published through the a2a-sdk (``TaskUpdater``):

    submitted → working ("calling X (1/2)", "X done in 3 ms (1/2)", …) → completed with artifacts
                                                                       → failed (readable reason)
              → rejected (hop violation, unknown skill, invalid arguments, missing capability)
              → input-required (missing arguments; the next message on the task continues it)
              → canceled (the SDK cancels ``execute``; the runner cancels and drains the tools)

Which error rejects, fails or pauses a task is decided in one place, :data:`TASK_OUTCOMES`.
Nothing internal leaks: an unexpected exception fails the task with a short reason and an error id
that is logged with the traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx
from a2a.helpers import get_text_parts, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, Task, TaskState
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Value

from node.call_log import calls_of
from node.errors import (
    BadArguments,
    BudgetExceeded,
    CapabilityMissing,
    ConfigError,
    ErrorKind,
    GuardError,
    HopLimitExceeded,
    InvalidArguments,
    NodeError,
    PeerError,
    PlanningError,
    RegistryError,
    StoreError,
    ToolError,
    ToolExecutionError,
    ToolNotFound,
    ToolTimeout,
)
from node.observability import logs, tracing
from node.observability.metrics import (
    MeteredUpdater,
    NodeMetrics,
    note_skill,
    refused_call,
    requested_skill,
    task_run,
)
from node.peers.hops import HopState, check_hop, read_hop
from node.planning import Request, parse_request, plan_request
from node.planning.direct import (
    InputNeeded,
    InvalidRequest,
    NoSkillNamed,
    UnknownSkill,
    is_free_text,
)
from node.planning.llm import (
    CostLimitExceeded,
    LLMPlanner,
    PlanningTimeout,
    StepLimitExceeded,
    ToolCallLimitExceeded,
)
from node.planning.providers.base import ProviderError
from node.planning.routing import TextRouting
from node.planning.settings import PlannerSettings, RoutingSettings
from node.server.proto_json import message_to_dict
from node.tooling import Tool, ToolCall, ToolCatalog, ToolContext, ToolResult, ToolRunner
from node.tooling.budget import CostBudget
from node.tooling.catalog import PreparedCall, look_again
from node.tooling.function_tool import FunctionTool
from node.tooling.guards.paths import Workspace
from node.tooling.guards.urls import UrlGuard
from node.tooling.results import ToolEvent

log = logging.getLogger(__name__)

#: ``ServerCallContext.state`` key set by the request handler when the sender waits only for the
#: settled task: a blocking send without a push configuration (no stream, no push delivery).
SETTLED_ONLY = "node.settled_only"


class Outcome(StrEnum):
    """The state a task ends in (or waits in) when an error stops it before its results."""

    REJECTED = "rejected"
    FAILED = "failed"
    INPUT_REQUIRED = "input-required"


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """A task's outcome for an error class, and the wire code (an error result's ``kind``)."""

    state: Outcome
    code: ErrorKind | None = None


_REJECTED = TaskOutcome(Outcome.REJECTED)
_FAILED = TaskOutcome(Outcome.FAILED)

#: Error class → task outcome: the only place that decides which error rejects, fails or pauses a
#: task. A tool error raised while admitting a task (its hops, names, arguments, capabilities)
#: rejects it; one raised while running is a result, and the task fails when every result failed.
#: Classes outside the task path (CLI, launcher, registry subclasses) resolve along their MRO.
TASK_OUTCOMES: Mapping[type[BaseException], TaskOutcome] = {
    InputNeeded: TaskOutcome(Outcome.INPUT_REQUIRED),  # NeedsInput, NeedsChoice
    NodeError: _FAILED,
    ConfigError: _FAILED,
    RegistryError: _FAILED,
    StoreError: _FAILED,
    # admitting: the request or a call cannot be accepted as sent
    PlanningError: _REJECTED,
    UnknownSkill: _REJECTED,
    NoSkillNamed: _REJECTED,
    InvalidRequest: _REJECTED,
    ToolError: _REJECTED,
    ToolNotFound: TaskOutcome(Outcome.REJECTED, ErrorKind.NOT_FOUND),
    BadArguments: TaskOutcome(Outcome.REJECTED, ErrorKind.BAD_ARGUMENTS),
    InvalidArguments: TaskOutcome(Outcome.REJECTED, ErrorKind.INVALID_ARGUMENTS),
    CapabilityMissing: TaskOutcome(Outcome.REJECTED, ErrorKind.CAPABILITY_MISSING),
    HopLimitExceeded: TaskOutcome(Outcome.REJECTED, ErrorKind.HOP_LIMIT),
    # running: the work was accepted and could not be done
    BudgetExceeded: TaskOutcome(Outcome.FAILED, ErrorKind.BUDGET_EXCEEDED),
    ToolTimeout: TaskOutcome(Outcome.FAILED, ErrorKind.TIMEOUT),
    GuardError: TaskOutcome(Outcome.FAILED, ErrorKind.GUARD),
    PeerError: TaskOutcome(Outcome.FAILED, ErrorKind.PEER),
    ToolExecutionError: TaskOutcome(Outcome.FAILED, ErrorKind.EXECUTION),
    StepLimitExceeded: _FAILED,
    ToolCallLimitExceeded: _FAILED,
    PlanningTimeout: _FAILED,
    CostLimitExceeded: TaskOutcome(Outcome.FAILED, ErrorKind.BUDGET_EXCEEDED),
    ProviderError: _FAILED,
}


def task_outcome(exc: BaseException) -> TaskOutcome | None:
    """The outcome ``exc`` gives a task (its nearest class in :data:`TASK_OUTCOMES`), or None."""
    for cls in type(exc).__mro__:
        outcome = TASK_OUTCOMES.get(cls)
        if outcome is not None:
            return outcome
    return None


@dataclass(slots=True)
class NodeServices:
    """What the node shares with its tools; ``http`` is the app's client, set by its lifespan."""

    workspace: Workspace | None = None
    url_guard: UrlGuard | None = None
    http: httpx.AsyncClient | None = None
    metrics: NodeMetrics | None = None  # the app's metrics, when the card turns them on


@dataclass(slots=True)
class ExecutorSettings:
    """What the executor needs beyond the tools: identity, limits and shared services."""

    agent_id: str
    max_hops: int = 4
    max_calls_per_task: int = 16
    task_cost_budget: float | None = None
    anonymous_capabilities: frozenset[str] = frozenset()
    planner: PlannerSettings | None = None  # free-text requests go to the LLM loop when set
    routing: RoutingSettings = field(default_factory=RoutingSettings)  # plain text without one
    services: NodeServices = field(default_factory=lambda: NodeServices())


def get_data_parts(parts: Sequence[Part]) -> list[Any]:
    """The SDK's ``get_data_parts`` (each data part's value as ``MessageToDict`` gives it).

    Through :func:`~node.server.proto_json.message_to_dict`: the same values, in half the time.
    """
    return [message_to_dict(part.data) for part in parts if part.HasField("data")]


def _data_part(data: Any) -> Part:
    return Part(data=ParseDict(data, Value()))


def _result_part(result: ToolResult) -> Part:
    if isinstance(result.output, str):
        return Part(text=result.output)
    return _data_part(result.output)


#: Characters of results repeated as text in the completed status (the artifacts hold them whole).
MAX_STATUS_TEXT = 8000


def _bounded(text: str) -> str:
    if len(text) <= MAX_STATUS_TEXT:
        return text
    return text[:MAX_STATUS_TEXT] + " … (cut: the task's artifacts hold the whole result)"


def result_text(results: list[ToolResult]) -> str:
    """The readable answer of a finished task: one result's text, or one line per call."""
    if len(results) == 1 and results[0].ok:
        return _bounded(results[0].text)
    return _bounded("\n".join(f"{r.tool}: {r.text}" for r in results))


class _ArtifactSink:
    """Stores a tool's whole output as a task artifact when it is over the tool's bound."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater

    async def store(self, call: ToolCall, text: str) -> str:
        name = f"{call.name}.full-output"
        await self._updater.add_artifact([Part(text=text)], name=name)
        return f"artifact {name!r}"


@dataclass(frozen=True, slots=True)
class _Admitted:
    """A message that passed admission: its request, the call it continues, its tool context."""

    request: Request
    pending: dict[str, Any] | None
    ctx: ToolContext
    is_free_text: bool


@dataclass(frozen=True, slots=True)
class Prepared:
    """A structured request's calls, prepared and capability-checked, and its tool context."""

    calls: list[tuple[ToolCall, PreparedCall]]
    ctx: ToolContext
    silent_start: bool = False  # no WORKING update before the call (:func:`silent_start`)


def runs_instantly(tool: Tool) -> bool:
    """A read-only sync function run on the loop: its policy's promise of microsecond work."""
    return (
        isinstance(tool, FunctionTool)
        and tool.inline
        and tool.read_only
        and not asyncio.iscoroutinefunction(tool.function)
    )


def silent_start(context: RequestContext, calls: list[tuple[ToolCall, PreparedCall]]) -> bool:
    """Whether a task may go from its start straight to its final state, without WORKING.

    One call that runs instantly (:func:`runs_instantly`), for a sender that waits only for the
    settled task (:data:`SETTLED_ONLY`): the WORKING update (no message) would last microseconds,
    nobody is streamed or pushed its events, and the task folds to the same final state without it
    (a status without a message adds nothing to the history). It costs the SDK path an event and
    a store write per task.
    """
    call_context = context.call_context
    return (
        len(calls) == 1
        and call_context is not None
        and call_context.state.get(SETTLED_ONLY) is True
        and runs_instantly(calls[0][1].tool)
    )


class NodeExecutor(AgentExecutor):
    """Runs structured requests against the node's tools; peers are tools too."""

    def __init__(
        self,
        tools: ToolCatalog,
        skills: Callable[[], Mapping[str, Tool]],
        settings: ExecutorSettings,
    ) -> None:
        self._tools = tools
        self._skills = skills
        self._settings = settings
        self._routing = TextRouting(settings.routing)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task, updater = await self.begin(context, event_queue)
        with task_run(self._settings.services.metrics, updater):  # counted by its final state
            await self._settle(task, updater, self._handle(context, task, updater))

    async def begin(
        self, context: RequestContext, event_queue: EventQueue
    ) -> tuple[Task, TaskUpdater]:
        """The task the request runs in (a new one is enqueued first) and its updater."""
        message = context.message
        assert message is not None  # the SDK always passes the request's message here
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        user = context.call_context.user if context.call_context is not None else None
        principal = user.user_name if user is not None and user.is_authenticated else "anonymous"
        logs.bind(task_id=task.id, context_id=task.context_id, principal=principal)  # this task's
        return task, MeteredUpdater(event_queue, task.id, task.context_id)  # calls, state

    def prepare(self, context: RequestContext, task: Task, updater: TaskUpdater) -> Prepared | None:
        """Admit and plan a structured request: the calls :meth:`finish` runs.

        None when the model planner takes the request; raises what :data:`TASK_OUTCOMES` maps
        (the lean path, :mod:`node.server.lean_path`, then leaves the request to :meth:`execute`).
        """
        message = context.message
        assert message is not None
        admitted = self._admit(context, message, task, updater)
        if self._settings.planner is not None and admitted.is_free_text:
            return None
        calls = self._plan(admitted, updater)
        return Prepared(calls, admitted.ctx, silent_start(context, calls))

    async def finish(self, prepared: Prepared, task: Task, updater: TaskUpdater) -> None:
        """Run and report prepared calls, ending the task exactly as :meth:`execute` does."""
        with task_run(self._settings.services.metrics, updater):
            await self._settle(task, updater, self._finish(prepared, updater))

    async def _settle(
        self, task: Task, updater: TaskUpdater, work: Coroutine[Any, Any, None]
    ) -> None:
        """Await ``work``; an error ends the task by :data:`TASK_OUTCOMES` (or as internal).

        The task's span (:mod:`node.observability.tracing`) covers it; one log line says how it
        ended.
        """
        start, ended = time.perf_counter(), "ran"
        attributes = {"a2a.task.id": task.id, "a2a.context.id": task.context_id}
        with tracing.span("task", attributes=attributes):
            try:
                await work
            except (NodeError, InputNeeded) as exc:
                found = task_outcome(exc)
                ended = str(found.state) if found is not None else "failed"
                if ended != Outcome.INPUT_REQUIRED:
                    tracing.set_error(f"{ended}: {exc}")
                await self._stop(updater, exc)
            except asyncio.CancelledError:
                ended = "canceled"
                raise
            except Exception:
                error_id = uuid.uuid4().hex[:12]
                ended = f"failed with an internal error (error id {error_id})"
                tracing.set_error(ended)
                log.exception("task %s %s", task.id, ended)
                await updater.failed(self._say(updater, f"internal error (error id {error_id})"))
            finally:
                ms = (time.perf_counter() - start) * 1000
                log.info("task %s %s (%.1f ms)", task.id, ended, ms)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        task_id = task.id if task else context.task_id
        context_id = task.context_id if task else context.context_id
        assert task_id and context_id
        await TaskUpdater(event_queue, task_id, context_id).cancel()

    # -- one request ------------------------------------------------------------------------

    async def _handle(self, context: RequestContext, task: Task, updater: TaskUpdater) -> None:
        """Admit, plan, run, report; an error on the way ends the task by :data:`TASK_OUTCOMES`."""
        message = context.message
        assert message is not None
        admitted = self._admit(context, message, task, updater)
        if self._settings.planner is not None and admitted.is_free_text:
            await self._plan_with_model(admitted.request, admitted.ctx, updater)
            return
        try:
            calls = self._plan(admitted, updater)
        except UnknownSkill as exc:  # an exposed peer's skill not discovered yet: look once more
            if exc.name is None or not await look_again(self._tools, exc.name):
                raise
            calls = self._plan(admitted, updater)
        await self._finish(Prepared(calls, admitted.ctx, silent_start(context, calls)), updater)

    async def _finish(self, prepared: Prepared, updater: TaskUpdater) -> None:
        """Run the prepared calls and report their results."""
        note_skill(updater, *(call.name for call, _ in prepared.calls))  # metrics' skill label
        results = await self._run(prepared.calls, prepared.ctx, updater, prepared.silent_start)
        await self._report(results, updater)

    def _admit(
        self, context: RequestContext, message: Message, task: Task, updater: TaskUpdater
    ) -> _Admitted:
        """Check the message's hops (raises :class:`HopLimitExceeded`) and read its request."""
        metadata = message_to_dict(message.metadata) if message.HasField("metadata") else {}
        hop = read_hop(metadata, default_max_hops=self._settings.max_hops)
        check_hop(hop, self._settings.agent_id, time.time())
        request = parse_request(
            get_text_parts(message.parts),
            get_data_parts(message.parts),
            metadata,
            context.metadata,  # the request's own params.metadata
        )
        note_skill(updater, requested_skill(request))
        pending = self._pending(task)
        return _Admitted(
            request=request,
            pending=pending,
            ctx=self._tool_context(context, metadata, hop, updater),
            is_free_text=pending is None and is_free_text(request),
        )

    def _plan(
        self, admitted: _Admitted, updater: TaskUpdater
    ) -> list[tuple[ToolCall, PreparedCall]]:
        """The request's calls, prepared and capability-checked once, for the runner to run.

        Raises what :data:`TASK_OUTCOMES` turns into a rejection or an input-required pause.
        """
        calls = plan_request(
            admitted.request,
            self._skills(),
            pending=admitted.pending,
            max_calls=self._settings.max_calls_per_task,
            routing=self._routing,
        )
        prepared: list[tuple[ToolCall, PreparedCall]] = []
        for call in calls:
            try:
                ready = self._tools.prepare_call(call.name, call.arguments)
            except ToolError as exc:
                refused_call(updater, call.name, exc)  # counted if the task ends on it
                raise
            call.arguments = ready.arguments
            prepared.append((call, ready))
        granted = admitted.ctx.capabilities
        missing = {c for _, ready in prepared for c in ready.tool.requires} - granted
        if missing:
            raise CapabilityMissing(f"missing capability: {', '.join(sorted(missing))}")
        return prepared

    async def _report(self, results: list[ToolResult], updater: TaskUpdater) -> None:
        """One artifact per result; the task fails when every call failed, else completes.

        The completed status carries the results as text (:func:`result_text`): clients that read
        the status message, or the last agent message, as the answer (crewAI) see the result, not
        the last progress message.
        """
        for result in results:
            name = result.tool if result.ok else f"{result.tool}.error"
            part = _result_part(result) if result.ok else _data_part(self._error_data(result))
            await updater.add_artifact([part], name=name)
        failures = [r for r in results if not r.ok]
        if failures and len(failures) == len(results):
            reason = "; ".join(f"{r.tool}: {r.error}" for r in failures)
            await updater.failed(self._say(updater, reason[:2000]))
        else:
            await updater.complete(self._say(updater, result_text(results)))

    async def _run(
        self,
        prepared: list[tuple[ToolCall, PreparedCall]],
        ctx: ToolContext,
        updater: TaskUpdater,
        silent: bool = False,
    ) -> list[ToolResult]:
        """Run the calls; the first "calling" update is the move to working.

        A one-call task moves to working without a message: clients that join every status
        message of a stream into the answer (crewAI) then see only the result; with ``silent``
        (:func:`silent_start`) it does not move to working at all.

        Each status update is an event through the SDK's queue and a store write, so the last
        call's "done" is left to the terminal status that follows it at once (it cost ~15 % of
        throughput on a one-call task).
        """
        total = len(prepared)
        started = done = 0

        async def progress(event: ToolEvent) -> None:
            nonlocal started, done
            if event.kind == "started":
                started += 1
                if total == 1:  # the move to working says nothing that could read as the answer
                    if not silent:
                        await updater.start_work()
                    return
                text = f"calling {event.tool} ({started}/{total})"
            else:
                done += 1
                if done == total:
                    return
                outcome = "done" if event.ok else f"failed ({event.error_kind})"
                text = (
                    f"{event.tool} {outcome} in {event.duration_s * 1000:.0f} ms ({done}/{total})"
                )
            await updater.update_status(TaskState.TASK_STATE_WORKING, self._say(updater, text))

        runner = ToolRunner(self._tools, on_event=progress, output_sink=_ArtifactSink(updater))
        return await runner.run_prepared(prepared, ctx)

    async def _plan_with_model(
        self, request: Request, ctx: ToolContext, updater: TaskUpdater
    ) -> None:
        """The LLM loop over every tool of the node (internal ones included), within its limits."""
        assert self._settings.planner is not None
        http = self._settings.services.http
        if http is None:
            raise RuntimeError("the LLM planner needs the app's httpx client")
        await updater.start_work()
        planner = LLMPlanner.from_settings(self._settings.planner, http)

        async def progress(text: str) -> None:
            await updater.update_status(TaskState.TASK_STATE_WORKING, self._say(updater, text))

        runner = ToolRunner(self._tools, output_sink=_ArtifactSink(updater))
        outcome = await planner.run(request.text, self._tools, runner, ctx, progress=progress)
        trace = [
            {"tool": r.tool, "ok": r.ok, **({"error": r.error} if not r.ok else {})}
            for r in outcome.results
        ]
        if trace:
            await updater.add_artifact([_data_part({"calls": trace})], name="tool_calls")
        await updater.add_artifact([Part(text=outcome.answer)], name="answer")
        await updater.complete(self._say(updater, _bounded(outcome.answer)))

    # -- helpers ----------------------------------------------------------------------------

    async def _stop(self, updater: TaskUpdater, exc: NodeError | InputNeeded) -> None:
        """End (or pause) the task as :data:`TASK_OUTCOMES` says for ``exc``."""
        outcome = task_outcome(exc)
        if outcome is None:  # pragma: no cover - NodeError is in the table
            raise exc
        if outcome.state is Outcome.INPUT_REQUIRED and isinstance(exc, InputNeeded):
            parts = [Part(text=str(exc)), _data_part(exc.to_data())]
            await updater.requires_input(updater.new_agent_message(parts))
        elif outcome.state is Outcome.REJECTED:
            await updater.reject(self._say(updater, str(exc)))
        else:
            await updater.failed(self._say(updater, str(exc)))

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Message:
        return updater.new_agent_message([Part(text=text)])

    @staticmethod
    def _error_data(result: ToolResult) -> dict[str, Any]:
        kind = result.error_kind or ErrorKind.EXECUTION
        return {"error": result.error, "kind": str(kind), "tool": result.tool}

    @staticmethod
    def _pending(task: Task) -> dict[str, Any] | None:
        """The call an input-required task is waiting to complete, if any."""
        if task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            return None
        for data in get_data_parts(task.status.message.parts):
            if isinstance(data, dict) and isinstance(data.get("pending"), dict):
                pending: dict[str, Any] = data["pending"]
                return pending
        return None

    def _tool_context(
        self,
        context: RequestContext,
        metadata: Mapping[str, Any],
        hop: HopState,
        updater: TaskUpdater,
    ) -> ToolContext:
        async def progress(text: str) -> None:
            await updater.update_status(TaskState.TASK_STATE_WORKING, self._say(updater, text))

        call_context = context.call_context
        user = call_context.user if call_context else None
        authenticated = bool(user and user.is_authenticated)
        auth = call_context.state.get("auth") if call_context else None
        capabilities = (
            frozenset(getattr(auth, "scopes", ()))
            if authenticated
            else self._settings.anonymous_capabilities
        )
        budget = CostBudget(self._settings.task_cost_budget)
        services = self._settings.services
        return ToolContext(
            principal=user.user_name if authenticated and user else "anonymous",
            capabilities=capabilities,
            budget=budget,
            workspace=services.workspace,
            url_guard=services.url_guard,
            http=services.http,
            deadline=hop.deadline,  # the caller's, bounds every tool
            progress=progress,
            agent_id=self._settings.agent_id,
            max_hops=self._settings.max_hops,
            message_metadata=dict(metadata),
            calls=calls_of(updater),
            metrics=services.metrics,
        )
