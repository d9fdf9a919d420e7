"""The planning loop against a scripted model, for both wire formats, with real tools and runner."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from node.errors import BudgetExceeded, ErrorKind, PlanningError
from node.planning.llm import (
    CostLimitExceeded,
    LLMPlanner,
    PlanningTimeout,
    StepLimitExceeded,
    ToolCallLimitExceeded,
)
from node.planning.providers import Usage
from node.tooling import Toolbox, ToolContext, ToolRunner, tool
from node.tooling.budget import CostBudget
from node.tooling.catalog import public
from tests.planning.planning_support import HANG, Dialect, Model

pytestmark = pytest.mark.asyncio(loop_scope="module")
WAIT = 2.0


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
async def upper(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def setup(
    dialect: Dialect, model: Model, http: httpx.AsyncClient, *tools: Any, **settings: Any
) -> tuple[LLMPlanner, Toolbox, ToolRunner]:
    registry = Toolbox(tools or (add, upper))
    planner = LLMPlanner.from_settings(dialect.settings(model[1], **settings), http)
    return planner, registry, ToolRunner(registry)


async def test_tool_call_then_answer(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, _ = model
    scripted.then(
        dialect.reply(calls=[("call_1", "add", {"a": 2, "b": 3})], usage=(100, 20)),
        dialect.reply("The sum is 5.", usage=(130, 8)),
    )
    planner, registry, runner = setup(dialect, model, http)

    outcome = await planner.run("add 2 and 3", registry, runner, ToolContext())

    assert outcome.answer == "The sum is 5."
    assert outcome.steps == 2
    assert outcome.usage == Usage(230, 28)
    assert [(r.call_id, r.tool, r.ok, r.output) for r in outcome.results] == [
        ("call_1", "add", True, 5)
    ]
    first, second = (r.body for r in scripted.requests)
    assert dialect.tool_names(first) == ["add", "upper"]
    assert dialect.tool_results(first) == []
    assert dialect.tool_results(second) == [("call_1", "5")]


async def test_parallel_calls_in_one_turn_run_together(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    started = {"left": asyncio.Event(), "right": asyncio.Event()}

    @tool(read_only=True)
    async def meet(side: str) -> str:
        started[side].set()
        other = "right" if side == "left" else "left"
        await asyncio.wait_for(started[other].wait(), WAIT)  # only possible if both run at once
        return side

    scripted, _ = model
    scripted.then(
        dialect.reply(
            calls=[("c_l", "meet", {"side": "left"}), ("c_r", "meet", {"side": "right"})]
        ),
        dialect.reply("met"),
    )
    planner, registry, runner = setup(dialect, model, http, meet)

    outcome = await planner.run("meet", registry, runner, ToolContext())

    assert outcome.answer == "met"
    assert [r.output for r in outcome.results] == ["left", "right"]
    assert dialect.tool_results(scripted.requests[1].body) == [("c_l", "left"), ("c_r", "right")]


async def test_invalid_arguments_go_back_to_the_model(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    scripted, _ = model
    scripted.then(
        dialect.reply(calls=[("c1", "add", {"a": "two", "b": 3})]),
        dialect.reply(calls=[("c2", "add", {"a": 2, "b": 3})]),
        dialect.reply("5"),
    )
    planner, registry, runner = setup(dialect, model, http)

    outcome = await planner.run("add", registry, runner, ToolContext())

    assert outcome.answer == "5"
    assert [r.error_kind for r in outcome.results] == [ErrorKind.INVALID_ARGUMENTS, None]
    [(call_id, content)] = dialect.tool_results(scripted.requests[1].body)
    assert call_id == "c1"
    assert content.startswith("error (invalid_arguments)")


async def test_unknown_tool_goes_back_to_the_model_with_a_hint_only(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    scripted, _ = model
    scripted.then(
        dialect.reply(calls=[("c1", "ad", {"a": 1, "b": 1}), ("c2", "upper", {"text": "x"})]),
        dialect.reply("done"),
    )
    planner, registry, runner = setup(dialect, model, http)

    outcome = await planner.run("go", registry, runner, ToolContext())

    assert outcome.answer == "done"
    results = dialect.tool_results(scripted.requests[1].body)
    assert results == [
        ("c1", "error (not_found): unknown tool 'ad'; did you mean 'add'?"),
        ("c2", "X"),
    ]


async def test_tools_outside_the_catalog_never_run(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    ran: list[str] = []

    @tool(scope="internal")
    async def secret_admin() -> str:
        """Internal only."""
        ran.append("secret_admin")
        return "pwned"

    scripted, _ = model
    scripted.then(dialect.reply(calls=[("c1", "secret_admin", {})]), dialect.reply("no"))
    planner, registry, runner = setup(dialect, model, http, add, secret_admin)

    outcome = await planner.run("go", public(registry), runner, ToolContext())

    assert ran == []
    assert outcome.results[0].error_kind == ErrorKind.NOT_FOUND
    assert dialect.tool_names(scripted.requests[0].body) == ["add"]


async def test_progress_reports_steps_and_calls(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    said: list[str] = []

    async def progress(text: str) -> None:
        said.append(text)

    scripted, _ = model
    scripted.then(dialect.reply(calls=[("c1", "add", {"a": 1, "b": 1})]), dialect.reply("2"))
    planner, registry, runner = setup(dialect, model, http)

    await planner.run("go", registry, runner, ToolContext(), progress=progress)

    assert said == ["thinking (step 1/8)", "calling add", "thinking (step 2/8)"]


async def test_step_limit(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, _ = model
    scripted.then(*(dialect.reply(calls=[(f"c{i}", "add", {"a": i, "b": 1})]) for i in range(3)))
    planner, registry, runner = setup(dialect, model, http, max_steps=2)

    with pytest.raises(StepLimitExceeded, match=r"after 2 steps \(max_steps\)"):
        await planner.run("loop forever", registry, runner, ToolContext())
    assert len(scripted.requests) == 2  # the last step's calls are not run


async def test_tool_call_limit(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    ran: list[int] = []

    @tool
    async def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    scripted, _ = model
    scripted.then(
        dialect.reply(calls=[("c1", "count", {"n": 1})]),
        dialect.reply(calls=[("c2", "count", {"n": 2}), ("c3", "count", {"n": 3})]),
    )
    planner, registry, runner = setup(dialect, model, http, count, max_tool_calls=2)

    with pytest.raises(ToolCallLimitExceeded, match=r"3 tool calls.*limit of 2"):
        await planner.run("count", registry, runner, ToolContext())
    assert ran == [1]


async def test_wall_time_limit(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, _ = model
    scripted.then(HANG)
    planner, registry, runner = setup(dialect, model, http, timeout_s=0.1)

    with pytest.raises(PlanningTimeout, match=r"no answer within 0\.1 s"):
        await planner.run("slow", registry, runner, ToolContext())


async def test_the_task_deadline_shortens_the_wall_time(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    scripted, _ = model
    scripted.then(HANG)
    planner, registry, runner = setup(dialect, model, http)
    ctx = ToolContext(deadline=time.time() + 0.1)

    with pytest.raises(PlanningTimeout):
        await planner.run("slow", registry, runner, ctx)


async def test_model_cost_is_charged_and_bounded(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    scripted, _ = model
    scripted.then(
        dialect.reply(calls=[("c1", "add", {"a": 1, "b": 1})], usage=(1000, 1000)),
        dialect.reply("2", usage=(1000, 1000)),
    )
    planner, registry, runner = setup(
        dialect, model, http, cost_per_1k_input_tokens=1.0, cost_per_1k_output_tokens=2.0
    )
    budget = CostBudget(5.0)

    with pytest.raises(CostLimitExceeded, match="cost budget exceeded") as caught:
        await planner.run("go", registry, runner, ToolContext(budget=budget))
    assert budget.spent == 3.0  # the first request; the second would exceed the limit
    assert isinstance(caught.value, BudgetExceeded)
    assert isinstance(caught.value, PlanningError)


async def test_a_spent_budget_stops_before_asking_the_model(
    dialect: Dialect, model: Model, http: httpx.AsyncClient
):
    scripted, _ = model
    planner, registry, runner = setup(dialect, model, http, cost_per_1k_input_tokens=1.0)
    budget = CostBudget(1.0)
    budget.charge(1.0)

    with pytest.raises(CostLimitExceeded, match="is spent"):
        await planner.run("go", registry, runner, ToolContext(budget=budget))
    assert scripted.requests == []


async def test_free_models_charge_nothing(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, _ = model
    scripted.then(dialect.reply("hi", usage=(10_000, 10_000)))
    planner, registry, runner = setup(dialect, model, http)
    budget = CostBudget(0.0)

    outcome = await planner.run("go", registry, runner, ToolContext(budget=budget))

    assert (outcome.answer, outcome.steps, budget.spent) == ("hi", 1, 0.0)


async def test_a_failing_progress_callback_does_not_stop_the_loop(
    dialect: Dialect, model: Model, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
):
    async def progress(text: str) -> None:
        raise RuntimeError("the event queue is gone")

    scripted, _ = model
    scripted.then(dialect.reply("fine"))
    planner, registry, runner = setup(dialect, model, http)

    outcome = await planner.run("go", registry, runner, ToolContext(), progress=progress)

    assert outcome.answer == "fine"
    assert "progress callback failed" in caplog.text
