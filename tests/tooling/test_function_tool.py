from __future__ import annotations

import dataclasses
import enum
import functools
import threading
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from node.errors import ConfigError, InvalidArguments
from node.tooling import FunctionTool, Tool, ToolContext, ToolPolicy, tool
from node.tooling.function_tool import parse_docstring


@tool(read_only=True, tags=["math"], examples=["add 2 and 3"], requires=["calc"], cost=0.5)
async def add(a: int, b: Annotated[int, Field(ge=0, le=5)] = 0) -> int:
    """Add two integers.

    Handy for sums.

    Args:
        a: The first term.
        b (int): The second term,
            at most five.

    Returns:
        The sum.
    """
    return a + b


def test_decorator_makes_a_tool_with_policy() -> None:
    assert isinstance(add, FunctionTool)
    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.read_only
    assert add.concurrency_safe
    assert add.policy.tags == ("math",)
    assert add.policy.examples == ("add 2 and 3",)
    assert add.requires == frozenset({"calc"})
    assert add.policy.cost == 0.5
    add.check()


def test_schema_is_plain_json_schema_from_signature_and_docstring() -> None:
    assert add.description == "Add two integers.\n\nHandy for sums."
    assert add.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first term."},
            "b": {
                "type": "integer",
                "description": "The second term, at most five.",
                "default": 0,
                "minimum": 0,
                "maximum": 5,
            },
        },
        "required": ["a"],
        "additionalProperties": False,
    }


def test_bare_decorator_and_no_docstring() -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert ping.name == "ping"
    assert ping.description == "ping"
    assert ping.parameters == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_names_of_basemodel_attributes_are_fine_as_parameters() -> None:
    @tool(name="shadowing")
    def fn(json: str, schema: int, model_config: bool = False) -> str:
        return json

    assert set(fn.parameters["properties"]) == {"json", "schema", "model_config"}


class Doc(BaseModel):
    title: str


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


def test_titles_are_stripped_but_a_property_named_title_is_kept() -> None:
    @tool
    def save(title: str, doc: Doc) -> None:
        """Save."""

    assert "title" not in save.parameters["properties"]["title"]
    assert save.parameters["$defs"]["Doc"] == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": ["title"],
    }


def test_context_parameter_is_injected_and_not_in_schema() -> None:
    seen: list[ToolContext] = []

    @tool
    async def who(greeting: str, ctx: ToolContext) -> str:
        seen.append(ctx)
        return f"{greeting}, {ctx.principal}"

    assert list(who.parameters["properties"]) == ["greeting"]
    assert who.parameters["required"] == ["greeting"]


async def test_context_is_passed_to_the_function() -> None:
    @tool
    async def who(greeting: str, ctx: ToolContext) -> str:
        return f"{greeting}, {ctx.principal}"

    assert await who.execute({"greeting": "hi"}, ToolContext(principal="ana")) == "hi, ana"


async def test_sync_function_runs_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.execute({}, ToolContext()) != loop_thread


async def test_rich_types_are_converted_and_models_dumped() -> None:
    @tool
    def paint(colour: Colour, at: Point, tags: tuple[str, ...] = ()) -> Point:
        assert isinstance(colour, Colour)
        assert isinstance(at, Point)
        assert isinstance(tags, tuple)
        return Point(x=at.x + 1, y=at.y)

    result = await paint.execute(
        {"colour": "red", "at": {"x": 1, "y": 2}, "tags": ["a"]}, ToolContext()
    )
    assert result == {"x": 2, "y": 2}


async def test_conversion_failure_is_invalid_arguments() -> None:
    @tool
    def at(p: Point) -> int:
        return p.x

    with pytest.raises(InvalidArguments, match="p:"):
        await at.execute({"p": {"x": "not a number"}}, ToolContext())


def test_kwargs_allow_extra_properties() -> None:
    @tool
    def anything(a: int, **rest: Any) -> dict[str, Any]:
        return rest

    assert "additionalProperties" not in anything.parameters


def test_var_positional_is_refused() -> None:
    def bad(*values: int) -> int:
        return sum(values)

    with pytest.raises(ConfigError, match="keyword"):
        tool(bad)


def test_unresolvable_hint_is_a_config_error() -> None:
    def bad(x: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(ConfigError, match="type hints"):
        tool(bad)


def test_from_function_and_direct_call() -> None:
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    made = FunctionTool.from_function(double, name="twice", exclusive=True, timeout=3)
    assert made.name == "twice"
    assert made.exclusive
    assert not made.concurrency_safe
    assert made.policy.timeout == 3
    assert made(4) == 8


def test_parse_docstring_sections() -> None:
    description, params = parse_docstring(
        """Summary line.

        Body text.

        Arguments:
            path (str): Where.
            *rest: The others.

        Raises:
            ValueError: never a parameter.
        """
    )
    assert description == "Summary line.\n\nBody text."
    assert params == {"path": "Where.", "rest": "The others."}


class Doubler:
    """Double a number (an async callable object)."""

    async def __call__(self, x: int) -> int:
        return 2 * x


async def test_async_callable_objects_are_awaited_not_threaded() -> None:
    made = FunctionTool(Doubler(), name="double")
    assert made.description == "Double a number (an async callable object)."
    assert await made.execute({"x": 2}, ToolContext()) == 4


async def test_partials_keep_the_unbound_parameters() -> None:
    async def scale(x: int, factor: int) -> int:
        """Scale a number."""
        return x * factor

    made = FunctionTool(functools.partial(scale, factor=3), name="triple")
    assert made.description == "Scale a number."
    assert made.parameters["required"] == ["x"]
    assert await made.execute({"x": 2}, ToolContext()) == 6


async def test_inline_sync_tools_run_on_the_event_loop_thread() -> None:
    import threading

    from node.tooling import ToolContext

    @tool(inline=True)
    def where() -> str:
        """Name the thread."""
        return threading.current_thread().name

    @tool
    def where_threaded() -> str:
        """Name the thread."""
        return threading.current_thread().name

    here = threading.current_thread().name
    assert await where.execute({}, ToolContext()) == here
    assert await where_threaded.execute({}, ToolContext()) != here


def test_policy_is_one_frozen_object_and_unknown_policy_keywords_are_config_errors() -> None:
    made = tool(read_only=True, requires=["admin"], tags=["t"])(lambda: 1)
    assert made.policy == ToolPolicy(read_only=True, requires=frozenset({"admin"}), tags=("t",),
                                     isolation="thread")  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.policy.timeout = 1  # type: ignore[misc]
    with pytest.raises(ConfigError, match="unknown policy fields"):
        tool(read_onyl=True)(lambda: 1)
