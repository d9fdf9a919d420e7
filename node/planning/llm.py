"""The LLM planner: model → tool calls → results as tool messages → model, until it answers.

Every round trip is bounded, and each limit raises its own :class:`PlanningError` subclass::

    PlanningError
    ├── StepLimitExceeded      the model still wanted tools after ``max_steps`` round trips
    ├── ToolCallLimitExceeded  the model asked for more than ``max_tool_calls`` calls in all
    ├── PlanningTimeout        no answer within ``timeout_s`` (or the task's deadline)
    ├── CostLimitExceeded      model usage would exceed ``ctx.budget`` (also a BudgetExceeded)
    └── ProviderError          the model endpoint failed (see ``providers.base``)

Tool calls go through the given :class:`ToolRunner` (validation, capabilities, concurrency,
timeouts, output bounds, errors as results). Only the tools of the given catalog can run: any other
name comes back to the model as a ``not_found`` result, as does every other tool failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from node.errors import BudgetExceeded, ErrorKind, PlanningError
from node.planning.providers import (
    AssistantMessage,
    ChatProvider,
    Message,
    SystemMessage,
    ToolResultsMessage,
    Usage,
    UserMessage,
    make_provider,
)
from node.planning.settings import PlannerSettings
from node.tooling import ToolCall, ToolCatalog, ToolContext, ToolResult, ToolRunner
from node.tooling.catalog import not_found_message
from node.tooling.context import ProgressCallback

__all__ = [
    "CostLimitExceeded",
    "LLMPlanner",
    "PlanOutcome",
    "PlanningTimeout",
    "StepLimitExceeded",
    "ToolCallLimitExceeded",
]

log = logging.getLogger(__name__)
_NAMES_IN_PROGRESS = 5


class StepLimitExceeded(PlanningError):
    """The model still asked for tools on its last allowed step."""


class ToolCallLimitExceeded(PlanningError):
    """The model asked for more tool calls than the loop allows."""


class PlanningTimeout(PlanningError):
    """The loop did not reach an answer within its wall time."""


class CostLimitExceeded(BudgetExceeded, PlanningError):
    """Model usage would exceed the task's cost budget."""


@dataclass(slots=True)
class PlanOutcome:
    """The model's final answer, every tool result in call order, steps taken, tokens used."""

    answer: str
    results: list[ToolResult]
    steps: int
    usage: Usage


class LLMPlanner:
    """Runs the bounded model/tool loop of :class:`PlannerSettings` against a provider."""

    def __init__(self, settings: PlannerSettings, provider: ChatProvider) -> None:
        self.settings = settings
        self.provider = provider

    @classmethod
    def from_settings(cls, settings: PlannerSettings, http: httpx.AsyncClient) -> LLMPlanner:
        """A planner whose provider is the one ``settings`` names, speaking through ``http``."""
        return cls(settings, make_provider(settings, http))

    async def run(
        self,
        prompt: str,
        catalog: ToolCatalog,
        runner: ToolRunner,
        ctx: ToolContext,
        *,
        progress: ProgressCallback | None = None,
    ) -> PlanOutcome:
        """Loop until the model answers without tool calls, or raise when a limit is hit."""
        limit = self._time_limit(ctx)
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await self._loop(prompt, catalog, runner, ctx, progress)
        except TimeoutError:
            if scope.expired():
                raise PlanningTimeout(
                    f"planning stopped: no answer within {limit:.3g} s (timeout_s)"
                ) from None
            raise

    async def _loop(
        self,
        prompt: str,
        catalog: ToolCatalog,
        runner: ToolRunner,
        ctx: ToolContext,
        progress: ProgressCallback | None,
    ) -> PlanOutcome:
        s = self.settings
        definitions = catalog.definitions()
        names = frozenset(d.name for d in definitions)
        messages: list[Message] = [SystemMessage(s.system_prompt), UserMessage(prompt)]
        results: list[ToolResult] = []
        usage = Usage()
        calls_made = 0
        for step in range(1, s.max_steps + 1):
            await _say(progress, f"thinking (step {step}/{s.max_steps})")
            self._check_budget(ctx)
            turn = await self.provider.complete(messages, definitions)
            usage += turn.usage
            self._charge(ctx, turn.usage)
            if not turn.tool_calls:
                return PlanOutcome(turn.text, results, step, usage)
            if step == s.max_steps:
                break
            calls_made += len(turn.tool_calls)
            if calls_made > s.max_tool_calls:
                raise ToolCallLimitExceeded(
                    f"planning stopped: the model asked for {calls_made} tool calls, more than "
                    f"the limit of {s.max_tool_calls} (max_tool_calls)"
                )
            messages.append(AssistantMessage(turn.text, tuple(turn.tool_calls)))
            await _say(progress, _calling(turn.tool_calls))
            batch = await _run_calls(turn.tool_calls, names, runner, ctx)
            results.extend(batch)
            messages.append(ToolResultsMessage(tuple(batch)))
        raise StepLimitExceeded(
            f"planning stopped: the model still wanted tools after {s.max_steps} steps (max_steps)"
        )

    def _time_limit(self, ctx: ToolContext) -> float:
        """``timeout_s``, shortened to the task's deadline (``ctx.deadline``)."""
        if ctx.deadline is None:
            return self.settings.timeout_s
        return max(min(self.settings.timeout_s, ctx.deadline - time.time()), 0.0)

    def _costs(self) -> bool:
        s = self.settings
        return bool(s.cost_per_1k_input_tokens or s.cost_per_1k_output_tokens)

    def _check_budget(self, ctx: ToolContext) -> None:
        if ctx.budget is not None and self._costs() and ctx.budget.exhausted:
            raise CostLimitExceeded(
                f"planning stopped: the cost budget of {ctx.budget.limit:g} is spent"
            )

    def _charge(self, ctx: ToolContext, usage: Usage) -> None:
        cost = self.settings.cost_of(usage.input_tokens, usage.output_tokens)
        if ctx.budget is None or not cost:
            return
        try:
            ctx.budget.charge(cost, "the model request")
        except BudgetExceeded as exc:
            raise CostLimitExceeded(f"planning stopped: {exc}") from exc


async def _run_calls(
    calls: Sequence[ToolCall], names: frozenset[str], runner: ToolRunner, ctx: ToolContext
) -> list[ToolResult]:
    """Run the calls to tools in ``names`` through ``runner``; any other name is not found."""
    allowed = [call for call in calls if call.name in names]
    ran = iter(await runner.run(allowed, ctx) if allowed else ())
    return [
        next(ran)
        if call.name in names
        else ToolResult.failure(call, ErrorKind.NOT_FOUND, not_found_message(call.name, names))
        for call in calls
    ]


def _calling(calls: Sequence[ToolCall]) -> str:
    names = list(dict.fromkeys(call.name[:64] for call in calls))
    shown = ", ".join(names[:_NAMES_IN_PROGRESS])
    more = f" and {len(names) - _NAMES_IN_PROGRESS} more" if len(names) > _NAMES_IN_PROGRESS else ""
    return f"calling {shown}{more}"


async def _say(progress: ProgressCallback | None, text: str) -> None:
    if progress is None:
        return
    try:
        await progress(text)
    except Exception:
        log.exception("planner progress callback failed on %r", text)
