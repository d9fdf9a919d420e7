"""calculate, number_stats, json_query: non-finite numbers are clear errors; work is bounded."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import math
import os
import time
from typing import Any

import pytest

from node.errors import ErrorKind
from node.tooling import Toolbox, ToolRunner
from node.tooling.isolation import default_pool
from tools.calculator import calculate, number_stats
from tools.json_query import MAX_RESULT_VALUES, json_query

RUNNER = ToolRunner(Toolbox([calculate, number_stats, json_query]))


async def run(name: str, arguments: dict[str, Any]) -> Any:
    return await RUNNER.run_one(name, arguments)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("[NaN]", "data holds NaN, which is not a JSON number"),
        ('{"a": -Infinity}', "data holds -Infinity, which is not a JSON number"),
        ("[1e400]", "data holds 1e400, a number too large for a float"),
    ],
)
async def test_json_query_refuses_non_finite_json_text(data: str, message: str) -> None:
    result = await run("json_query", {"expression": "@", "data": data})
    assert (result.ok, result.error_kind, result.error) == (
        False,
        ErrorKind.INVALID_ARGUMENTS,
        message,
    )


async def test_json_query_refuses_a_result_that_overflows() -> None:
    result = await run("json_query", {"expression": "sum(@)", "data": [1e308, 1e308]})
    assert (result.ok, result.error_kind) == (False, ErrorKind.EXECUTION)
    assert "holds inf, which JSON cannot carry" in (result.error or "")


async def test_json_query_refuses_a_result_that_would_explode_as_json() -> None:
    expression = ".".join(["[@,@]"] * 60)  # 60 small lists in memory, 2**60 values as JSON
    start = time.monotonic()
    result = await run("json_query", {"expression": expression, "data": 1})
    assert time.monotonic() - start < 5.0
    assert result.error_kind == ErrorKind.EXECUTION
    assert f"too large (more than {MAX_RESULT_VALUES:,} values)" in (result.error or "")


async def test_json_query_exponential_work_is_killed_at_the_timeout() -> None:
    await default_pool().start()
    hasty = copy.copy(json_query)
    hasty.policy = dataclasses.replace(hasty.policy, timeout=0.5)
    expression = "|".join(["[@,@][]"] * 40)  # doubles the data 40 times: 2**40 values
    run = ToolRunner(Toolbox([hasty]))
    start = time.monotonic()
    call = asyncio.create_task(run.run_one("json_query", {"expression": expression, "data": [1]}))
    while not default_pool().busy:
        assert not call.done(), "the query never reached a worker"
        await asyncio.sleep(0.001)
    (worker,) = default_pool().busy
    result = await call
    assert time.monotonic() - start < hasty.policy.timeout + 1.0
    assert result.error_kind == ErrorKind.TIMEOUT
    deadline = time.monotonic() + 2.0
    while not gone(worker):
        assert time.monotonic() < deadline, "the worker outlived its call"
        await asyncio.sleep(0.005)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_number_stats_refuses_non_finite_input_by_position() -> None:
    result = await run("number_stats", {"numbers": [1.0, math.inf]})
    assert (result.error_kind, result.error) == (
        ErrorKind.INVALID_ARGUMENTS,
        "numbers[1] is inf; only finite numbers count",
    )


async def test_calculate_rounds_to_huge_negative_digits_at_once() -> None:
    start = time.monotonic()
    result = await run("calculate", {"expression": "round(5, -10000000)"})
    assert time.monotonic() - start < 0.5  # was hours of 10**(10**7) on the event loop
    assert (result.ok, result.output) == (True, 0)
    assert (await run("calculate", {"expression": "round(1234.5678, -2)"})).output == 1200.0
    assert (await run("calculate", {"expression": "round(1234.5678, 2)"})).output == 1234.57
