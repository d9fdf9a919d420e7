"""Query JSON data with JMESPath expressions."""

from __future__ import annotations

import json
from typing import Annotated, Any

import jmespath
from jmespath.exceptions import JMESPathError, ParseError
from pydantic import Field

from node.errors import InvalidArguments, ToolError
from node.tooling import tool

__all__ = ["json_query"]


@tool(
    read_only=True,
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
            data = json.loads(data)
        except ValueError as exc:
            raise InvalidArguments(f"data is a string but not valid JSON: {exc}") from exc
    try:
        compiled = jmespath.compile(expression)
    except ParseError as exc:
        detail = " ".join(str(exc).split())
        raise InvalidArguments(f"invalid JMESPath expression {expression!r}: {detail}") from exc
    try:
        return compiled.search(data)
    except JMESPathError as exc:
        raise ToolError(f"JMESPath expression {expression!r} failed: {exc}") from exc
