"""The runner: prepared calls in, results out, in call order; every failure is a result.

A caller that already prepared its calls (:meth:`ToolRunner.prepare`: name, arguments,
capabilities) runs them with :meth:`ToolRunner.run_prepared`; :meth:`ToolRunner.run` and
:meth:`ToolRunner.run_one` prepare raw calls first, each preparation failure becoming a result.
Consecutive concurrency-safe calls run together, anything else runs alone, in order. Before a call
runs, the caller's capabilities are checked and its cost is charged; while it runs, a timeout
applies (the call's or the tool's, never beyond the task's deadline ``ctx.deadline``, epoch
seconds). Cancelling :meth:`ToolRunner.run` cancels the running calls and waits for them to finish.
Output longer than the tool's ``max_output`` is cut, and the full text is handed to the optional
:class:`OutputSink`; an output holding NaN or Infinity (which JSON cannot carry) becomes an error
result instead. A timeout or a cancellation does what the tool's ``isolation`` allows
(:mod:`node.tooling.isolation`): a ``process`` call's worker is killed; a ``thread`` call is no
longer waited for, but its thread runs on to the end; an ``inline`` call cannot be interrupted at
all, which is why only microsecond work may be inline. Messages of unexpected exceptions never
show where the workspace lives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from time import perf_counter
from typing import Any, Protocol, cast

from node.call_log import current_call
from node.errors import CapabilityMissing, ErrorKind, ToolError, ToolExecutionError, ToolTimeout
from node.observability import tracing
from node.tooling.catalog import PreparedCall, ToolCatalog
from node.tooling.context import ToolContext
from node.tooling.results import (
    EventCallback,
    ToolCall,
    ToolEvent,
    ToolResult,
    non_finite_path,
    to_text,
)
from node.tooling.tool import Tool

__all__ = ["OutputSink", "ToolRunner"]

logger = logging.getLogger("node.tooling.runner")
_MAX_ERROR = 500  # characters of an unexpected exception's message in a result
_AFTER_TIMEOUT = {
    "process": "; its worker process was killed",
    "thread": "; its thread may still be running",
}


class OutputSink(Protocol):
    """Keeps the full text of an output that was too long to return inline."""

    async def store(self, call: ToolCall, text: str) -> str:
        """Store ``text``; return a reference a caller can use to find it again."""
        ...


class ToolRunner:
    """Runs tool calls against a registry (or a filtered view of one)."""

    def __init__(
        self,
        registry: ToolCatalog,
        *,
        on_event: EventCallback | None = None,
        output_sink: OutputSink | None = None,
    ) -> None:
        self.registry = registry
        self._on_event = on_event
        self._sink = output_sink

    async def run_one(
        self, name: str, arguments: Any = None, ctx: ToolContext | None = None
    ) -> ToolResult:
        """Run a single call (``ctx`` defaults to an anonymous context)."""
        return (await self.run([ToolCall(name, arguments)], ctx or ToolContext()))[0]

    async def run(self, calls: Sequence[ToolCall], ctx: ToolContext) -> list[ToolResult]:
        """Run ``calls``; return one result per call, in call order.

        Every call is prepared (name, arguments, capabilities) before any of them runs; a call
        that cannot be prepared is an error result.
        """
        return await self._run_all([(call, self._try_prepare(call, ctx)) for call in calls], ctx)

    async def run_prepared(
        self, prepared: Sequence[tuple[ToolCall, PreparedCall]], ctx: ToolContext
    ) -> list[ToolResult]:
        """Run calls already prepared (by :meth:`prepare` or the catalog, capabilities checked).

        One result per call, in call order; nothing is prepared or checked again.
        """
        return await self._run_all(list(prepared), ctx)

    def prepare(self, call: ToolCall, ctx: ToolContext) -> PreparedCall:
        """Resolve ``call``'s tool and arguments and check ``ctx``'s capabilities.

        Raises the :class:`ToolError` of the problem (not found, bad or invalid arguments,
        capability missing).
        """
        prepared = self.registry.prepare_call(call.name, call.arguments)
        requires = prepared.tool.requires
        if requires and not requires <= ctx.capabilities:
            missing = ", ".join(sorted(requires - ctx.capabilities))
            raise CapabilityMissing(f"{call.name} requires the capability {missing}")
        return prepared

    def _try_prepare(self, call: ToolCall, ctx: ToolContext) -> PreparedCall | ToolResult:
        try:
            return self.prepare(call, ctx)
        except ToolError as exc:
            return ToolResult.failure(call, exc.kind, str(exc))

    async def _run_all(
        self, items: list[tuple[ToolCall, PreparedCall | ToolResult]], ctx: ToolContext
    ) -> list[ToolResult]:
        results: list[ToolResult | None] = [None] * len(items)
        batch: list[tuple[int, ToolCall, PreparedCall]] = []
        for index, (call, ready) in enumerate(items):
            if isinstance(ready, ToolResult):
                results[index] = ready
                if ctx.metrics is not None:  # refused before it ran
                    ctx.metrics.tool_call(call.name, ready.error_kind or ErrorKind.EXECUTION, 0.0)
                if self._on_event is not None:
                    await self._emit(ToolEvent("finished", call, ready))
            elif ready.tool.policy.concurrency_safe:
                batch.append((index, call, ready))
            else:
                await self._run_batch(batch, results, ctx)
                batch = []
                results[index] = await self._call(call, ready, ctx)
        await self._run_batch(batch, results, ctx)
        return cast(list[ToolResult], results)

    async def _run_batch(
        self,
        batch: list[tuple[int, ToolCall, PreparedCall]],
        results: list[ToolResult | None],
        ctx: ToolContext,
    ) -> None:
        if len(batch) == 1:
            index, call, prepared = batch[0]
            results[index] = await self._call(call, prepared, ctx)
        elif batch:
            async with asyncio.TaskGroup() as group:  # cancelled → cancels and drains its tasks
                tasks = [(i, group.create_task(self._call(c, p, ctx))) for i, c, p in batch]
            for index, task in tasks:
                results[index] = task.result()

    async def _call(self, call: ToolCall, prepared: PreparedCall, ctx: ToolContext) -> ToolResult:
        tool = prepared.tool
        start = perf_counter()
        record = ctx.calls.open(call.name, tool.policy.group) if ctx.calls is not None else None
        try:
            if tool.policy.cost and ctx.budget is not None:
                ctx.budget.charge(tool.policy.cost, call.name)
            if self._on_event is not None:
                await self._emit(ToolEvent("started", call))
            with (
                current_call(record),  # the peer client notes its task id on the record
                tracing.span(f"tool {call.name}", attributes={"a2a_node.tool": call.name}),
            ):
                output = await self._execute(tool, prepared.arguments, ctx, call.timeout)
            output, text = _text_form(output)
            limit = tool.policy.max_output
            if len(text) <= limit:
                result = ToolResult(call.id, call.name, True, output, None, None,
                                    perf_counter() - start, _text=text)  # fmt: skip
            else:
                result = await self._truncated(call, limit, text, start)
        except ToolError as exc:
            result = ToolResult.failure(call, exc.kind, str(exc), perf_counter() - start)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # a real cancellation of this run: propagate (and drain)
            logger.warning("tool %s raised CancelledError without being cancelled", call.name)
            message = "the tool's work was cancelled"
            result = ToolResult.failure(call, ErrorKind.EXECUTION, message, perf_counter() - start)
        except Exception as exc:
            logger.exception("tool %s raised", call.name)
            message = _redact(f"{type(exc).__name__}: {exc}", ctx)
            if len(message) > _MAX_ERROR:
                message = message[:_MAX_ERROR] + "…"
            result = ToolResult.failure(call, ErrorKind.EXECUTION, message, perf_counter() - start)
        if record is not None and ctx.calls is not None:  # before "finished": updates carry it
            ctx.calls.close(record, ok=result.ok, error=result.error)
        if ctx.metrics is not None:
            ctx.metrics.tool_call(call.name, result.error_kind, result.duration_s)
        if self._on_event is not None:
            await self._emit(ToolEvent("finished", call, result))
        return result

    @staticmethod
    async def _execute(
        tool: Tool, arguments: dict[str, Any], ctx: ToolContext, timeout: float | None
    ) -> Any:
        if timeout is None:
            timeout = tool.policy.timeout
        if ctx.deadline is not None:
            left = ctx.deadline - time.time()
            if left <= 0:
                raise ToolTimeout(f"the task's deadline passed before {tool.name} could run")
            timeout = min(timeout, left)
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                return await tool.execute(arguments, ctx)
        except TimeoutError:
            if scope.expired():
                note = _AFTER_TIMEOUT.get(tool.policy.isolation, "")
                raise ToolTimeout(f"{tool.name} timed out after {timeout:g} s{note}") from None
            raise

    async def _truncated(self, call: ToolCall, limit: int, text: str, start: float) -> ToolResult:
        ref = None
        if self._sink is not None:
            try:
                ref = await self._sink.store(call, text)
            except Exception:
                logger.exception("output sink failed to store the output of %s", call.name)
        where = f"stored as {ref}" if ref else "dropped"
        note = f"[output truncated: {limit} of {len(text)} characters; full output {where}]"
        return ToolResult(call.id, call.name, True, f"{text[:limit]}\n{note}", None, None,
                          perf_counter() - start, truncated=True, full_output_ref=ref)  # fmt: skip

    async def _emit(self, event: ToolEvent) -> None:
        assert self._on_event is not None
        try:
            await self._on_event(event)
        except Exception:
            logger.exception("tool event callback failed on %s %s", event.kind, event.tool)


def _text_form(output: Any) -> tuple[Any, str]:
    """``(output, text)``; an output that is not JSON data is replaced by its text.

    Raises :class:`ToolError` when the output holds NaN or an infinity: JSON has no such numbers,
    and a peer, a store or a model would each read them differently (or not at all).
    """
    if isinstance(output, str):
        return output, output
    try:
        return output, json.dumps(output, ensure_ascii=False, separators=(",", ":"),
                                  allow_nan=False)  # fmt: skip
    except (TypeError, ValueError):
        where = non_finite_path(output)
        if where is not None:
            at = f" at {where}" if where else ""
            raise ToolExecutionError(
                f"the output holds a number that is not finite (NaN or Infinity){at}; "
                "JSON cannot carry it"
            ) from None
        text = to_text(output)
        return text, text


def _redact(message: str, ctx: ToolContext) -> str:
    """``message`` with every workspace root replaced by ``<workspace>``."""
    if ctx.workspace is not None:
        roots = sorted({str(r) for r in ctx.workspace.read_roots}, key=len, reverse=True)
        for root in roots:
            message = message.replace(root, "<workspace>")
    return message
