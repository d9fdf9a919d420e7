from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest

from node.errors import ErrorKind, GuardError
from node.tooling import Toolbox, ToolCall, ToolContext, ToolResult, ToolRunner, tool
from node.tooling.budget import CostBudget
from node.tooling.results import ToolEvent

WAIT = 2.0  # seconds a test waits for something that should happen at once


class Tracker:
    """Counts calls in flight and remembers the most seen at once by each tool."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak: dict[str, int] = {}

    async def visit(self, name: str) -> None:
        self.in_flight += 1
        try:
            for _ in range(5):
                self.peak[name] = max(self.peak.get(name, 0), self.in_flight)
                await asyncio.sleep(0)
        finally:
            self.in_flight -= 1


def make_runner(*tools: Any, **kwargs: Any) -> ToolRunner:
    return ToolRunner(Toolbox(tools), **kwargs)


async def test_concurrency_safe_calls_run_together() -> None:
    started = {"left": asyncio.Event(), "right": asyncio.Event()}

    @tool(read_only=True)
    async def meet(side: str) -> str:
        started[side].set()
        other = "right" if side == "left" else "left"
        await asyncio.wait_for(started[other].wait(), WAIT)  # only possible if both run at once
        return side

    runner = make_runner(meet)
    calls = [ToolCall("meet", {"side": "left"}), ToolCall("meet", {"side": "right"})]
    results = await runner.run(calls, ToolContext())
    assert [r.output for r in results] == ["left", "right"]
    assert all(r.ok for r in results)


async def test_exclusive_and_writing_tools_never_overlap() -> None:
    tracker = Tracker()

    @tool(read_only=True)
    async def reader(n: int) -> int:
        await tracker.visit(f"reader{n}")
        return n

    @tool(read_only=True, exclusive=True)
    async def exclusive() -> str:
        await tracker.visit("exclusive")
        return "x"

    @tool
    async def writer() -> str:
        await tracker.visit("writer")
        return "w"

    runner = make_runner(reader, exclusive, writer)
    calls = [
        ToolCall("reader", {"n": 1}),
        ToolCall("reader", {"n": 2}),
        ToolCall("exclusive"),
        ToolCall("reader", {"n": 3}),
        ToolCall("reader", {"n": 4}),
        ToolCall("writer"),
        ToolCall("reader", {"n": 5}),
    ]
    results = await runner.run(calls, ToolContext())
    assert [r.output for r in results] == [1, 2, "x", 3, 4, "w", 5]
    assert tracker.peak["exclusive"] == 1
    assert tracker.peak["writer"] == 1
    assert tracker.peak["reader5"] == 1
    assert tracker.peak["reader1"] == tracker.peak["reader2"] == 2
    assert tracker.peak["reader3"] == tracker.peak["reader4"] == 2


async def test_results_come_back_in_call_order_including_failures() -> None:
    @tool(read_only=True)
    async def slow_first(n: int) -> int:
        for _ in range(10 - n):
            await asyncio.sleep(0)
        return n

    runner = make_runner(slow_first)
    calls = [
        ToolCall("slow_first", {"n": 0}),
        ToolCall("nope", {}),
        ToolCall("slow_first", {"n": 5}),
        ToolCall("slow_first", {"n": "x"}),
        ToolCall("slow_first", {"n": 9}),
    ]
    results = await runner.run(calls, ToolContext())
    assert [r.call_id for r in results] == [c.id for c in calls]
    assert [r.output for r in results] == [0, None, 5, None, 9]
    assert results[1].error_kind is ErrorKind.NOT_FOUND
    assert results[3].error_kind is ErrorKind.INVALID_ARGUMENTS
    assert results[3].error == "n must be an integer"


async def test_timeout_becomes_a_result() -> None:
    @tool(timeout=0.05)
    async def hang() -> None:
        await asyncio.Event().wait()

    result = await make_runner(hang).run_one("hang")
    assert not result.ok
    assert result.error_kind is ErrorKind.TIMEOUT
    assert result.error == "hang timed out after 0.05 s"


async def test_a_tools_own_timeout_error_is_an_execution_error() -> None:
    @tool
    async def raises_timeout() -> None:
        raise TimeoutError("upstream")

    result = await make_runner(raises_timeout).run_one("raises_timeout")
    assert result.error_kind is ErrorKind.EXECUTION
    assert result.error == "TimeoutError: upstream"


async def test_task_deadline_caps_the_timeout() -> None:
    ran: list[bool] = []

    @tool(timeout=30)
    async def hang() -> None:
        ran.append(True)
        await asyncio.Event().wait()

    runner = make_runner(hang)
    past = ToolContext(deadline=time.time() - 1)
    result = await runner.run_one("hang", ctx=past)
    assert result.error_kind is ErrorKind.TIMEOUT
    assert "deadline" in (result.error or "")
    assert ran == []
    soon = ToolContext(deadline=time.time() + 0.05)
    result = await runner.run_one("hang", ctx=soon)
    assert result.error_kind is ErrorKind.TIMEOUT
    assert ran == [True]


@pytest.mark.parametrize("parallel", [False, True])
async def test_cancelling_run_cancels_and_drains_running_calls(parallel: bool) -> None:
    started = asyncio.Event()
    cleaned: list[str] = []

    @tool(read_only=parallel)
    async def hold(n: int) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits
            cleaned.append(f"hold{n}")

    runner = make_runner(hold)
    calls = [ToolCall("hold", {"n": 1}), ToolCall("hold", {"n": 2})]
    task = asyncio.create_task(runner.run(calls, ToolContext()))
    await asyncio.wait_for(started.wait(), WAIT)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(cleaned) == (["hold1", "hold2"] if parallel else ["hold1"])


def test_keyboard_interrupt_is_never_swallowed() -> None:
    @tool
    async def interrupt() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(make_runner(interrupt).run_one("interrupt"))


async def test_missing_capability_is_checked_before_running() -> None:
    ran: list[bool] = []

    @tool(requires=["admin", "files"])
    async def admin_only() -> None:
        ran.append(True)

    runner = make_runner(admin_only)
    result = await runner.run_one("admin_only", ctx=ToolContext(capabilities=frozenset({"files"})))
    assert result.error_kind is ErrorKind.CAPABILITY_MISSING
    assert result.error == "admin_only requires the capability admin"
    assert ran == []
    granted = ToolContext(capabilities=frozenset({"files", "admin", "more"}))
    assert (await runner.run_one("admin_only", ctx=granted)).ok


async def test_budget_is_charged_before_running_and_refuses_overruns() -> None:
    ran: list[int] = []

    @tool(cost=1.0, read_only=True)
    async def paid(n: int) -> int:
        ran.append(n)
        return n

    budget = CostBudget(1.5)
    runner = make_runner(paid)
    calls = [ToolCall("paid", {"n": 1}), ToolCall("paid", {"n": 2})]
    results = await runner.run(calls, ToolContext(budget=budget))
    assert results[0].ok
    assert results[1].error_kind is ErrorKind.BUDGET_EXCEEDED
    assert "budget" in (results[1].error or "")
    assert ran == [1]
    assert budget.spent == 1.0


async def test_sync_tool_runs_off_the_event_loop_thread() -> None:
    @tool
    def blocking() -> int:
        return threading.get_ident()

    result = await make_runner(blocking).run_one("blocking")
    assert result.ok
    assert result.output != threading.get_ident()


async def test_exception_becomes_an_execution_result_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    async def broken() -> None:
        raise ValueError("boom " * 200)

    with caplog.at_level(logging.ERROR, logger="node.tooling.runner"):
        result = await make_runner(broken).run_one("broken")
    assert result.error_kind is ErrorKind.EXECUTION
    assert (result.error or "").startswith("ValueError: boom boom")
    assert len(result.error or "") <= 501
    assert caplog.records[0].exc_info is not None


async def test_tool_errors_keep_their_kind() -> None:
    @tool
    async def guarded() -> None:
        raise GuardError("path escapes the workspace")

    result = await make_runner(guarded).run_one("guarded")
    assert result.error_kind is ErrorKind.GUARD
    assert result.text == "error (guard): path escapes the workspace"


class Sink:
    def __init__(self) -> None:
        self.stored: list[tuple[str, str]] = []

    async def store(self, call: ToolCall, text: str) -> str:
        self.stored.append((call.name, text))
        return f"artifact-{len(self.stored)}"


async def test_long_output_is_truncated_and_stored_in_the_sink() -> None:
    @tool(max_output=10)
    async def chatty() -> str:
        return "x" * 25

    sink = Sink()
    result = await make_runner(chatty, output_sink=sink).run_one("chatty")
    assert result.ok
    assert result.truncated
    assert result.full_output_ref == "artifact-1"
    assert result.output == (
        "x" * 10 + "\n[output truncated: 10 of 25 characters; full output stored as artifact-1]"
    )
    assert sink.stored == [("chatty", "x" * 25)]


async def test_long_data_output_is_bounded_on_its_json_text_without_a_sink() -> None:
    @tool(max_output=8)
    async def data() -> dict[str, Any]:
        return {"key": "value" * 3}

    result = await make_runner(data).run_one("data")
    assert result.truncated
    assert result.full_output_ref is None
    assert result.output.startswith('{"key":"')
    assert result.output.endswith("full output dropped]")


async def test_results_text_and_dict() -> None:
    @tool(read_only=True)
    async def data() -> dict[str, Any]:
        return {"a": [1, 2], "é": None}

    @tool
    async def odd() -> set[int]:
        return {1}

    runner = make_runner(data, odd)
    result = await runner.run_one("data")
    assert result.text == '{"a":[1,2],"é":null}'
    as_dict = result.to_dict()
    assert as_dict["ok"] is True
    assert as_dict["output"] == {"a": [1, 2], "é": None}
    assert set(as_dict) == {
        "call_id",
        "tool",
        "ok",
        "output",
        "error_kind",
        "error",
        "duration_s",
        "truncated",
        "full_output_ref",
    }
    odd_result = await runner.run_one("odd")
    assert odd_result.output == '"{1}"'  # not JSON data: returned as its text


async def test_events_report_start_and_finish_and_callback_errors_are_contained() -> None:
    events: list[ToolEvent] = []

    async def on_event(event: ToolEvent) -> None:
        events.append(event)
        if event.kind == "started":
            raise RuntimeError("observer bug")

    @tool(read_only=True)
    async def hello() -> str:
        return "hi"

    runner = make_runner(hello, on_event=on_event)
    results = await runner.run([ToolCall("hello"), ToolCall("missing")], ToolContext())
    assert [r.ok for r in results] == [True, False]
    kinds = [(e.kind, e.tool, e.ok) for e in events]
    assert kinds == [
        ("finished", "missing", False),
        ("started", "hello", None),
        ("finished", "hello", True),
    ]
    finished = events[-1]
    assert isinstance(finished.result, ToolResult)
    assert finished.duration_s >= 0
    assert finished.error_kind is None


async def test_empty_batch() -> None:
    assert await make_runner().run([], ToolContext()) == []


async def test_a_stray_cancelled_error_from_a_tool_is_a_result_not_a_cancellation() -> None:
    @tool(read_only=True)
    async def stray(n: int) -> int:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        future.cancel()
        return await future  # raises CancelledError though nobody cancelled the run

    runner = make_runner(stray)
    single = await runner.run_one("stray", {"n": 1})
    assert single.error_kind is ErrorKind.EXECUTION
    both = await runner.run(
        [ToolCall("stray", {"n": 1}), ToolCall("stray", {"n": 2})], ToolContext()
    )
    assert [r.error_kind for r in both] == [ErrorKind.EXECUTION, ErrorKind.EXECUTION]
