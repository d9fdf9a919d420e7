"""Query JSON data with JMESPath expressions.

JMESPath work can grow exponentially with the expression: each ``[@,@][]`` step doubles the
data, so 30 steps in a 2,000-character expression ask for a billion values. ``json_query``
therefore runs in a worker process (``isolation="process"``): at its timeout the worker is
killed, and its memory is capped. A result is also bounded before it leaves the worker, in
values counted the way JSON would write them out (``[@,@]`` nested 60 times is a few lists
sharing each other, yet 2^60 values as text). Numbers must be finite both ways: ``NaN`` and
``Infinity`` in the data are refused, and a result holding one (``sum()`` overflowing) is an
error.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, NoReturn

import jmespath
from jmespath.exceptions import JMESPathError, ParseError
from pydantic import Field

from node.errors import InvalidArguments, ToolExecutionError
from node.tooling import tool

__all__ = ["MAX_RESULT_VALUES", "json_query"]

MAX_RESULT_VALUES = 1_000_000  # values (containers and scalars) in a result, as JSON writes them


def _refuse_constant(name: str) -> NoReturn:
    raise InvalidArguments(f"data holds {name}, which is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InvalidArguments(f"data holds {text}, a number too large for a float")
    return value


def _quoted(expression: str) -> str:
    return repr(expression if len(expression) <= 80 else f"{expression[:80]}…")


def _check_result(result: Any, expression: str) -> None:
    """Refuse a result with more than MAX_RESULT_VALUES values or a non-finite number."""
    count = 0
    stack = [result]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_RESULT_VALUES:
            raise ToolExecutionError(
                f"the result of {_quoted(expression)} is too large (more than "
                f"{MAX_RESULT_VALUES:,} values); select less"
            )
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ToolExecutionError(
                f"the result of {_quoted(expression)} holds {value}, which JSON cannot carry "
                "(a sum or product too large for a float?)"
            )


@tool(
    read_only=True,
    isolation="process",
    tags=("json", "data"),
    examples=("people[?age > `30`].name", "length(items)"),
)
def json_query(expression: Annotated[str, Field(min_length=1, max_length=2000)], data: Any) -> Any:
    """Select and reshape JSON data with a JMESPath expression; returns the matching value.

    Examples: "people[?age > `30`].name", "items[0].id", "length(items)",
    "{names: people[*].name}". A missing key gives null.

    Args:
        expression: The JMESPath expression.
        data: The JSON value to query: an object or array, or a string holding JSON text.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
        except ValueError as exc:
            raise InvalidArguments(f"data is a string but not valid JSON: {exc}") from exc
    try:
        compiled = jmespath.compile(expression)
    except ParseError as exc:
        detail = " ".join(str(exc).split())
        raise InvalidArguments(f"invalid JMESPath expression {expression!r}: {detail}") from exc
    try:
        result = compiled.search(data)
    except JMESPathError as exc:
        raise ToolExecutionError(f"JMESPath expression {expression!r} failed: {exc}") from exc
    except RecursionError as exc:
        raise ToolExecutionError(
            f"JMESPath expression {_quoted(expression)} nests too deeply"
        ) from exc
    _check_result(result, expression)
    return result
