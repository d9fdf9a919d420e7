"""Isolation policy: inline, thread and process tools, and the killable worker pool."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from node.errors import ConfigError, ErrorKind, ToolError
from node.tooling import Toolbox, ToolContext, ToolRunner, tool
from node.tooling.isolation import WorkerPool, default_pool
from tests.tooling import workloads
from tests.tooling.workloads import crash, hog, refuse, square, wait_then_pid


def runner(*tools: object) -> ToolRunner:
    return ToolRunner(Toolbox([square, *tools]))  # type: ignore[list-item]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def until(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


@pytest.fixture
async def warm() -> None:
    """Workers started ahead, so that a short timeout measures the call, not the start-up."""
    await default_pool().start()


@pytest.mark.usefixtures("warm")
async def test_a_process_tool_that_loops_forever_times_out_and_its_worker_is_killed() -> None:
    run = runner(hog)
    call = asyncio.create_task(run.run_one("hog"))
    start = time.monotonic()
    await until(lambda: default_pool().busy)
    (worker,) = default_pool().busy
    result = await call
    assert time.monotonic() - start < hog.policy.timeout + 1.0
    assert (result.ok, result.error_kind) == (False, ErrorKind.TIMEOUT)
    assert "worker process was killed" in (result.error or "")
    assert gone(worker)
    assert worker not in default_pool().pids
    again = await run.run_one("square", {"x": 7})
    assert (again.ok, again.output) == (True, 49)


@pytest.mark.usefixtures("warm")
async def test_cancelling_a_process_call_kills_its_worker() -> None:
    call = asyncio.create_task(runner(hog).run_one("hog"))
    await until(lambda: default_pool().busy)
    (worker,) = default_pool().busy
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert gone(worker)


async def test_a_worker_is_reused_between_calls() -> None:
    run = runner(wait_then_pid)
    first = await run.run_one("wait_then_pid", {"seconds": 0})
    second = await run.run_one("wait_then_pid", {"seconds": 0})
    assert first.output == second.output != os.getpid()


async def test_tool_errors_raised_in_a_worker_are_results_of_their_kind() -> None:
    result = await runner(refuse).run_one("refuse", {"word": "spam"})
    assert (result.error_kind, result.error) == (ErrorKind.INVALID_ARGUMENTS, "spam is not welcome")


async def test_a_worker_that_dies_is_reported_and_replaced() -> None:
    run = runner(crash)
    result = await run.run_one("crash")
    assert (result.ok, result.error_kind) == (False, ErrorKind.EXECUTION)
    assert "died (exit code 3)" in (result.error or "")
    assert (await run.run_one("square", {"x": 3})).output == 9


async def test_the_pool_never_runs_more_workers_than_its_size() -> None:
    pool = WorkerPool(1)
    try:
        pids = await asyncio.gather(*(pool.run(workloads.pid_after, 0.05) for _ in range(3)))
        assert len(set(pids)) == 1
        assert len(pool.pids) == 1
    finally:
        pool.close()
    assert pool.pids == []
    assert gone(pids[0])


async def test_a_call_waiting_for_a_busy_pool_can_time_out_without_losing_the_slot() -> None:
    pool = WorkerPool(1)
    try:
        busy = asyncio.create_task(pool.run(workloads.pid_after, 0.3))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await pool.run(workloads.pid, 0)
        assert await busy == await pool.run(workloads.pid)  # the same worker serves on
    finally:
        pool.close()


async def test_a_worker_cannot_allocate_past_its_memory_limit() -> None:
    pool = WorkerPool(1, memory_limit_mb=256)
    try:
        with pytest.raises(MemoryError):
            await pool.run(workloads.allocate, 512)
        assert await pool.run(workloads.allocate, 1) == 1024 * 1024
    finally:
        pool.close()


async def test_closing_the_default_pool_kills_idle_workers() -> None:
    await runner().run_one("square", {"x": 2})
    (worker,) = default_pool().pids
    from node.tooling.isolation import close_default_pool

    close_default_pool()
    assert gone(worker)


def test_functions_a_worker_cannot_import_are_refused_at_definition() -> None:
    def local(x: int) -> int:
        """A closure."""
        return x

    with pytest.raises(ConfigError, match="module level"):
        tool(isolation="process")(local)


def test_process_tools_take_no_context_and_async_tools_stay_inline() -> None:
    with pytest.raises(ConfigError, match="ToolContext"):
        tool(isolation="process")(_with_context)
    with pytest.raises(ConfigError, match="async"):
        tool(isolation="process")(_async_tool)
    with pytest.raises(ConfigError, match="contradicts"):
        tool(inline=True, isolation="thread")(workloads.pid)


def _with_context(ctx: ToolContext) -> str:
    """Needs the context."""
    return ctx.principal


async def _async_tool() -> None:
    """Async."""


def test_isolation_defaults_and_the_inline_keyword() -> None:
    assert tool(workloads.pid).policy.isolation == "thread"
    assert tool(_async_tool).policy.isolation == "inline"
    assert tool(inline=True)(workloads.pid).policy.isolation == "inline"
    assert tool(inline=True)(workloads.pid).inline is True
    assert square.policy.isolation == "process"


async def test_a_thread_tool_timeout_says_the_thread_may_still_run() -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> None:
        """Block until released."""
        release.wait(5)

    try:
        result = await ToolRunner(Toolbox([stuck])).run_one("stuck")
    finally:
        release.set()
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "thread may still be running" in (result.error or "")


def test_declared_tools_state_where_their_work_runs() -> None:
    from node.tooling.declared import declared_tool

    command = declared_tool({"name": "ls", "description": "List.", "command": ["ls"]})
    http = declared_tool(
        {"name": "api", "description": "Call.", "http": {"url": "https://a.test/"}}
    )
    assert (command.policy.isolation, http.policy.isolation) == ("process", "inline")


async def test_closing_a_pool_ends_its_running_calls_with_an_error() -> None:
    pool = WorkerPool(1)
    call = asyncio.create_task(pool.run(workloads.spin))
    await until(lambda: pool.busy)
    (worker,) = pool.busy
    pool.close()
    with pytest.raises(ToolError, match="pool is closed"):
        await call
    assert gone(worker)
