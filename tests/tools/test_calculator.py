from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastjsonschema import JsonSchemaValueException

from node.errors import InvalidArguments, ToolError
from tools.calculator import MAX_INT_BITS, calculate, evaluate, number_stats

Call = Callable[..., Awaitable[Any]]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-(3)", -3),
        ("+4", 4),
        ("1.5e3", 1500.0),
        ("sqrt(16)", 4.0),
        ("abs(-2.5)", 2.5),
        ("round(3.14159, 2)", 3.14),
        ("min(3, 1, 2) + max(1, 5)", 6),
        ("log(e)", 1.0),
        ("log(8, 2)", 3.0),
        ("cos(0) + sin(0)", 1.0),
        ("floor(2.7) + ceil(2.1)", 5),
        ("2 ** 4095 // 2 ** 4094", 2),
    ],
)
async def test_calculate_good_expressions(call: Call, expression: str, expected: float) -> None:
    assert await call(calculate, expression=expression) == pytest.approx(expected)


async def test_calculate_constants(call: Call) -> None:
    assert await call(calculate, expression="pi") == math.pi
    assert await call(calculate, expression="2 * pi") == math.tau


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "(1).__class__",
        "[1, 2]",
        "x + 1",
        "lambda: 1",
        "1 if 1 else 2",
        "1 < 2",
        "'a' * 3",
        "True + 1",
        "1j",
        "1 << 100",
        "sqrt(x=4)",
        "math.sqrt(4)",
        "1 +",
        "2 ** 3 ** 4 ** 5 ** 6",
    ],
)
async def test_calculate_refuses_anything_but_arithmetic(call: Call, expression: str) -> None:
    with pytest.raises(ToolError):
        await call(calculate, expression=expression)


async def test_calculate_errors_are_clear(call: Call) -> None:
    with pytest.raises(ToolError, match="division by zero"):
        await call(calculate, expression="1 / (2 - 2)")
    with pytest.raises(ToolError, match="division by zero"):
        await call(calculate, expression="5 % 0")
    with pytest.raises(InvalidArguments, match="unknown function 'eval'"):
        await call(calculate, expression="eval('1')")
    with pytest.raises(InvalidArguments, match="invalid expression"):
        await call(calculate, expression="2 +* 3")
    with pytest.raises(ToolError, match="sqrt"):
        await call(calculate, expression="sqrt(-1)")
    with pytest.raises(ToolError, match="no real result"):
        await call(calculate, expression="(-8) ** 0.5")


async def test_calculate_guards_huge_results(call: Call) -> None:
    for expression in ("9 ** 9 ** 9", "10 ** 100000", "2 ** 5000", "(2 ** 4000) * (2 ** 4000)"):
        with pytest.raises(ToolError, match="too large"):
            await call(calculate, expression=expression)
    for expression in ("10.0 ** 400", "exp(1000)", "1e308 * 10"):
        with pytest.raises(ToolError, match="too large"):
            await call(calculate, expression=expression)
    assert (await call(calculate, expression=f"2 ** {MAX_INT_BITS - 1}")).bit_length() == 4096


async def test_calculate_schema_bounds(call: Call) -> None:
    with pytest.raises(JsonSchemaValueException):
        await call(calculate, expression="")
    with pytest.raises(JsonSchemaValueException):
        await call(calculate, expression="1+" * 600 + "1")
    assert evaluate("+".join(["1"] * 400)) == 400


async def test_number_stats(call: Call) -> None:
    assert await call(number_stats, numbers=[3, 1, 4, 1, 5]) == {
        "count": 5,
        "sum": 14.0,
        "mean": 2.8,
        "median": 3,
        "min": 1,
        "max": 5,
        "stdev": pytest.approx(1.7888543819998317),
    }
    single = await call(number_stats, numbers=[2.5])
    assert (single["mean"], single["median"], single["stdev"]) == (2.5, 2.5, None)
    assert (await call(number_stats, numbers=[1, 2, 3, 4]))["median"] == 2.5


async def test_number_stats_bad_input(call: Call) -> None:
    for bad in ([], ["1"], [True], None):
        with pytest.raises(JsonSchemaValueException):
            await call(number_stats, numbers=bad)
