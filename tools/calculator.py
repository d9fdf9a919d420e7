"""Arithmetic without ``eval``: a small evaluator over Python's ``ast``, and number statistics."""

from __future__ import annotations

import ast
import math
import operator
import statistics
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from node.errors import InvalidArguments, ToolExecutionError
from node.tooling import tool

__all__ = ["calculate", "evaluate", "number_stats"]

Number = int | float
MAX_INT_BITS = 4096  # about 1,233 decimal digits
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}
MAX_ROUND_DIGITS = 1300  # past this, round() answers the same for every allowed number


def _round(number: Number, ndigits: int | None = None) -> Number:
    """``round``, with ``ndigits`` clamped: ``round(5, -10**7)`` would compute 10**(10**7) (hours,
    on the event loop, since calculate is inline), yet every number allowed here (< 2**4096, about
    1e1233) rounds to 0 long before that."""
    if ndigits is None:
        return round(number)
    if not isinstance(ndigits, int):
        raise InvalidArguments("round(): the number of digits must be an integer")
    return round(number, max(-MAX_ROUND_DIGITS, min(MAX_ROUND_DIGITS, ndigits)))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_SYMBOLS |= {ast.Mod: "%", ast.Pow: "**"}


def _check(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolExecutionError(f"the result is too large (more than {MAX_INT_BITS} bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolExecutionError("the result is too large or undefined (overflow or not a number)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    exact = isinstance(base, int) and isinstance(exponent, int)
    bits = exponent * (abs(int(base)).bit_length() - 1) if exact else 0
    if bits > MAX_INT_BITS:
        raise ToolExecutionError(f"the result is too large (more than {MAX_INT_BITS} bits)")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolExecutionError(
            "a negative number raised to a fractional power has no real result"
        )
    return result


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise InvalidArguments("booleans are not numbers here; use 1 or 0")
        return _check(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check(_power(left, right))
        return _check(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = _FUNCTIONS.get(node.func.id)
        if function is None:
            known = ", ".join(sorted(_FUNCTIONS))
            raise InvalidArguments(f"unknown function {node.func.id!r}; known: {known}")
        args = [_eval(arg) for arg in node.args]
        try:
            return _check(function(*args))
        except (TypeError, ValueError) as exc:
            raise ToolExecutionError(f"{node.func.id}(): {exc}") from exc
    if isinstance(node, ast.Name):
        raise InvalidArguments(f"unknown name {node.id!r}; constants are {', '.join(_CONSTANTS)}")
    operators = " ".join(_SYMBOLS.values())
    raise InvalidArguments(
        f"unsupported syntax {type(node).__name__}: use numbers, {operators}, parentheses "
        "and the known functions"
    )


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression safely (see :func:`calculate`)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise InvalidArguments(f"invalid expression {expression!r}: {exc.msg}") from exc
    try:
        return _eval(tree.body)
    except ZeroDivisionError as exc:
        raise ToolExecutionError(f"division by zero in {expression!r}") from exc
    except OverflowError as exc:
        raise ToolExecutionError(f"the result of {expression!r} is too large") from exc
    except RecursionError as exc:
        raise InvalidArguments(f"expression {expression!r} is nested too deeply") from exc


# inline: bounded to microseconds (1,000 characters, results capped at 4,096 bits), and
# ast.parse must not run in several threads at once on CPython 3.11 (gh-106905)
@tool(
    read_only=True,
    inline=True,
    tags=("math",),
    examples=("2 * (3 + 4) ** 2", "sqrt(2) * pi"),
)
def calculate(expression: Annotated[str, Field(min_length=1, max_length=1000)]) -> Number:
    """Evaluate an arithmetic expression and return the number.

    Supports numbers, + - * / // % ** and parentheses, the constants pi, e and tau, and the
    functions sqrt, abs, round, min, max, log (log(x) or log(x, base)), log10, log2, exp,
    sin, cos, tan (radians), floor and ceil.

    Args:
        expression: The expression, such as "2 * (3 + 4) ** 2" or "round(sqrt(2), 3)".
    """
    return evaluate(expression)


@tool(read_only=True, tags=("math", "statistics"), examples=("Statistics of 3, 1, 4, 1, 5",))
def number_stats(
    numbers: Annotated[list[float], Field(min_length=1, max_length=1_000_000)],
) -> dict[str, Number | None]:
    """Summary statistics of a list of numbers.

    Returns count, sum, mean, median, min, max and the sample standard deviation
    (null for a single number).

    Args:
        numbers: The numbers, such as [3, 1, 4, 1, 5].
    """
    for index, number in enumerate(numbers):
        if not math.isfinite(number):
            raise InvalidArguments(f"numbers[{index}] is {number}; only finite numbers count")
    try:
        stats: dict[str, Number | None] = {
            "count": len(numbers),
            "sum": math.fsum(numbers),
            "mean": statistics.fmean(numbers),
            "median": statistics.median(numbers),
            "min": min(numbers),
            "max": max(numbers),
            "stdev": statistics.stdev(numbers) if len(numbers) > 1 else None,
        }
    except (OverflowError, ValueError) as exc:
        raise ToolExecutionError(f"cannot summarise these numbers: {exc}") from exc
    overflowed = [k for k, v in stats.items() if isinstance(v, float) and not math.isfinite(v)]
    if overflowed:
        raise ToolExecutionError(
            f"cannot summarise these numbers: the {', '.join(overflowed)} overflows a float"
        )
    return stats
