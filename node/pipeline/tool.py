"""A pipeline as one :class:`Tool`: its steps run in dependency waves through a :class:`ToolRunner`.

Every step whose dependencies have finished joins the next wave; a wave goes to one
``runner.run`` call, so the runner's policy applies (concurrency-safe steps together, others
alone, in declaration order). A step's result is its ``ToolResult.output``. A failed step with
``on_error: stop`` fails the pipeline with a :class:`ToolError` naming the step (and keeping the
step's error kind); with ``on_error: continue`` its output becomes ``{"error": ..., "kind": ...}``
and the pipeline goes on.

Policy of the pipeline tool: ``read_only`` when every local step tool is (peer tools count as
read-only), ``exclusive`` when any local step tool is, ``requires`` = the spec's plus those of its
local step tools, ``timeout`` = the spec's (default 120 s; steps also see it as their deadline).

Progress: when ``ctx.progress`` is set, it receives
one message per step as the step finishes: ``"step fetch (web__http_fetch) done (1/3)"`` or
``"step fetch (web__http_fetch) failed (1/3): <reason>"``. A failing callback is logged, never
raised. Steps do not see the callback (a nested pipeline reports nothing of its own steps).

A step whose tool is missing when it runs (a peer's, not discovered yet or gone) asks the catalog
to look again (:func:`~node.tooling.catalog.look_again`: the peer directory refreshes once,
bounded) before it fails.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.errors import ConfigError, ErrorKind, PeerError, ToolError, tool_error
from node.pipeline.refs import resolve
from node.pipeline.spec import PipelineSpec, StepSpec
from node.tooling.catalog import CombinedCatalog, ToolCatalog, look_again, not_found_message
from node.tooling.context import ToolContext
from node.tooling.results import ToolCall, ToolEvent
from node.tooling.runner import ToolRunner
from node.tooling.tool import Tool, ToolPolicy

__all__ = ["PipelineTool", "pipeline_tool"]

logger = logging.getLogger("node.pipeline")
_MAX_REASON = 300  # characters of a failure's reason in a progress message


@dataclass(frozen=True, slots=True, eq=False)
class _Step:
    spec: StepSpec
    template: dict[str, Any]
    deps: frozenset[str]


def pipeline_tool(
    spec: PipelineSpec, local: ToolCatalog, remote: ToolCatalog | None = None
) -> PipelineTool:
    """The tool running ``spec`` over the tools of ``local`` and, when given, ``remote``.

    ``local`` is fixed: a step naming a tool it lacks is a :class:`ConfigError`, unless a
    ``remote`` catalog (the peers' tools, which come and go) is given; such a step's tool is
    looked up in ``remote`` when the step runs.
    """
    found: list[Tool] = []
    for step in spec.steps:
        tool = local.get(step.tool)
        if tool is not None:
            found.append(tool)
        elif remote is None:
            names = frozenset(d.name for d in local.definitions())
            raise ConfigError(
                f"pipeline {spec.id!r}, step {step.id!r}: {not_found_message(step.tool, names)}"
            )
    catalog = local if remote is None else CombinedCatalog(local, remote)
    return PipelineTool(spec, catalog, found)


class PipelineTool(Tool):
    """One pipeline skill; build it with :func:`pipeline_tool`."""

    def __init__(self, spec: PipelineSpec, catalog: ToolCatalog, local: Sequence[Tool]) -> None:
        self.spec = spec
        self.name, self.description = spec.id, spec.description
        self.parameters = spec.input_schema
        self.policy = ToolPolicy(
            read_only=all(t.read_only for t in local),
            exclusive=any(t.exclusive for t in local),
            requires=frozenset(spec.requires).union(*(t.requires for t in local)),
            timeout=spec.timeout,
            scope=spec.scope,
            tags=tuple(spec.tags),
            examples=tuple(spec.examples),
        )
        self._catalog = catalog
        self._steps = tuple(_Step(s, s.template(), frozenset(s.dependencies())) for s in spec.steps)
        self._outputs = spec.output_steps()

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        run = _Run(self, arguments, ctx)
        pending = list(self._steps)
        while pending:
            wave = [s for s in pending if s.deps <= run.outputs.keys()]
            assert wave, "a validated pipeline has no cycles"
            pending = [s for s in pending if s not in wave]
            await run.wave(wave)
        if len(self._outputs) == 1:
            return run.outputs[self._outputs[0]]
        return {step_id: run.outputs[step_id] for step_id in self._outputs}


def _with_defaults(schema: Mapping[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The input with the schema's top-level ``default`` values filled in where absent."""
    properties = schema.get("properties", {})
    missing = {
        name: copy.deepcopy(prop["default"])
        for name, prop in properties.items()
        if name not in arguments and isinstance(prop, Mapping) and "default" in prop
    }
    return {**missing, **arguments} if missing else arguments


class _Run:
    """The state of one execution: outputs so far, progress, the runner of its steps."""

    def __init__(self, tool: PipelineTool, arguments: dict[str, Any], ctx: ToolContext) -> None:
        self.tool, self.input = tool, _with_defaults(tool.parameters, arguments)
        self.outputs: dict[str, Any] = {}
        self.finished = 0
        self.progress = ctx.progress
        self.ctx = _step_context(ctx, tool.policy.timeout)
        self.calls: dict[str, _Step] = {}
        self.full: dict[str, str] = {}  # call id → whole text of an output over its tool's bound
        self.runner = ToolRunner(tool._catalog, on_event=self._on_event, output_sink=self)

    async def store(self, call: ToolCall, text: str) -> str:
        """Output sink: a step's output is read by later steps, not by a model, so keep it whole.

        (The pipeline's own result is bounded again by the runner that runs the pipeline.)
        """
        self.full[call.id] = text
        return "the pipeline"

    def _whole(self, call: ToolCall, output: Any) -> Any:
        text = self.full.pop(call.id, None)
        if text is None:
            return output
        try:
            return json.loads(text)  # structured outputs were bounded as their JSON text
        except json.JSONDecodeError:
            return text

    async def wave(self, wave: list[_Step]) -> None:
        calls: list[ToolCall] = []
        for step in wave:
            try:
                arguments = resolve(step.template, input=self.input, steps=self.outputs,
                                    step=step.spec.id)  # fmt: skip
                catalog, name = self.tool._catalog, step.spec.tool
                if name not in catalog and not await look_again(catalog, name):  # a peer tool
                    raise PeerError(  # that went away, or that is not discovered even now
                        f"step {step.spec.id!r}: peer tool {step.spec.tool!r} is not available "
                        "(peer down or not discovered)"
                    )
            except ToolError as exc:
                await self._report(step, str(exc))
                self._settle(step, False, None, exc.kind, str(exc))
                continue
            call = ToolCall(step.spec.tool, arguments, timeout=step.spec.timeout)
            self.calls[call.id] = step
            calls.append(call)
        if calls:
            results = await self.runner.run(calls, self.ctx)
            for call, result in zip(calls, results, strict=True):
                step = self.calls[call.id]
                message = f"step {step.spec.id!r} ({step.spec.tool}) failed: {result.error}"
                output = self._whole(call, result.output)
                self._settle(step, result.ok, output, result.error_kind, message)

    def _settle(
        self, step: _Step, ok: bool, output: Any, kind: ErrorKind | None, message: str
    ) -> None:
        if ok:
            self.outputs[step.spec.id] = output
        elif step.spec.on_error == "continue":
            self.outputs[step.spec.id] = {"error": message, "kind": str(kind)}
        else:
            raise tool_error(kind, f"pipeline {self.tool.name!r}: {message}")

    async def _on_event(self, event: ToolEvent) -> None:
        if event.kind == "finished" and event.result is not None:
            result = event.result
            await self._report(self.calls[event.call.id], None if result.ok else result.error)

    async def _report(self, step: _Step, error: str | None) -> None:
        self.finished += 1
        if self.progress is None:
            return
        where = f"step {step.spec.id} ({step.spec.tool})"
        count = f"({self.finished}/{len(self.tool._steps)})"
        if error is None:
            text = f"{where} done {count}"
        else:
            reason = error if len(error) <= _MAX_REASON else error[:_MAX_REASON] + "…"
            text = f"{where} failed {count}: {reason}"
        try:
            await self.progress(text)
        except Exception:
            logger.exception("pipeline progress callback failed")


def _step_context(ctx: ToolContext, timeout: float) -> ToolContext:
    """``ctx`` for the steps: the pipeline's deadline applied, the progress callback left out."""
    deadline = time.time() + timeout
    if ctx.deadline is not None:
        deadline = min(deadline, ctx.deadline)
    return dataclasses.replace(ctx, deadline=deadline, progress=None)
