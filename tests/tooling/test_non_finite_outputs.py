"""NaN and infinities never leave a tool: the runner turns such an output into an error result."""

from __future__ import annotations

import math
from typing import Any

import pytest

from node.errors import ErrorKind
from node.tooling import Toolbox, ToolRunner, tool
from node.tooling.results import non_finite_path


@tool(inline=True)
def emit(kind: str) -> Any:
    """Return a value holding a non-finite number.

    Args:
        kind: Which value.
    """
    values: dict[str, Any] = {
        "nan": math.nan,
        "inf": math.inf,
        "nested": {"stats": [1.0, {"mean": -math.inf}]},
        "tuple": (1, math.nan),
        "fine": {"mean": 1.5, "values": [1, 2]},
    }
    return values[kind]


@pytest.mark.parametrize(
    ("kind", "where"),
    [("nan", ""), ("inf", ""), ("nested", " at /stats/1/mean"), ("tuple", " at /1")],
)
async def test_a_non_finite_number_in_the_output_is_an_error_result(kind: str, where: str) -> None:
    result = await ToolRunner(Toolbox([emit])).run_one("emit", {"kind": kind})
    assert (result.ok, result.output, result.error_kind) == (False, None, ErrorKind.EXECUTION)
    assert result.error == (
        f"the output holds a number that is not finite (NaN or Infinity){where}; "
        "JSON cannot carry it"
    )
    assert "NaN" not in result.text.replace("(NaN or Infinity)", "")


async def test_finite_outputs_pass_unchanged() -> None:
    result = await ToolRunner(Toolbox([emit])).run_one("emit", {"kind": "fine"})
    assert (result.ok, result.output, result.text) == (
        True,
        {"mean": 1.5, "values": [1, 2]},
        '{"mean":1.5,"values":[1,2]}',
    )


def test_non_finite_path_points_at_the_first_bad_number() -> None:
    assert non_finite_path({"a/b": [0.0, math.nan]}) == "/a~1b/1"
    assert non_finite_path({"a": "NaN", "b": [1, 2.5]}) is None
    loop: list[Any] = [1.0]
    loop.append(loop)
    assert non_finite_path(loop) is None
