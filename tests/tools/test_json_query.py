from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastjsonschema import JsonSchemaValueException

from node.errors import InvalidArguments, ToolError
from tools.json_query import json_query

Call = Callable[..., Awaitable[Any]]
PEOPLE = {"people": [{"name": "Ada", "age": 36}, {"name": "Alan", "age": 41}, {"name": "Kid"}]}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("people[?age > `40`].name", ["Alan"]),
        ("people[0].name", "Ada"),
        ("length(people)", 3),
        ("{names: people[*].name}", {"names": ["Ada", "Alan", "Kid"]}),
        ("missing.key", None),
        ("max_by(people[?age], &age).name", "Alan"),
    ],
)
async def test_json_query_on_objects(call: Call, expression: str, expected: Any) -> None:
    assert await call(json_query, expression=expression, data=PEOPLE) == expected


async def test_json_query_accepts_json_text_and_arrays(call: Call) -> None:
    assert await call(json_query, expression="a[1]", data='{"a": [1, 2]}') == 2
    assert await call(json_query, expression="[*] | sum(@)", data=[1, 2, 3]) == 6
    assert await call(json_query, expression="@", data=5) == 5


async def test_json_query_errors(call: Call) -> None:
    with pytest.raises(InvalidArguments, match="invalid JMESPath expression 'people\\['"):
        await call(json_query, expression="people[", data=PEOPLE)
    with pytest.raises(InvalidArguments, match="not valid JSON"):
        await call(json_query, expression="a", data="{not json")
    with pytest.raises(ToolError, match="Unknown function"):
        await call(json_query, expression="nope(@)", data=PEOPLE)
    with pytest.raises(ToolError, match="invalid type"):
        await call(json_query, expression="abs(people)", data=PEOPLE)
    with pytest.raises(JsonSchemaValueException):
        await call(json_query, expression="a")
    with pytest.raises(JsonSchemaValueException):
        await call(json_query, expression="", data={})
