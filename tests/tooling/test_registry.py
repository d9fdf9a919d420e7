from __future__ import annotations

from typing import Any

import pytest

from node.errors import ConfigError, ErrorKind, InvalidArguments, ToolError, ToolNotFound
from node.tooling import Tool, ToolContext, ToolPolicy, ToolRegistry, tool


class Echo(Tool):
    description = "Echo the arguments."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
        "required": ["text"],
        "additionalProperties": False,
    }

    def __init__(self, name: str = "echo", group: str = "local", scope: str = "public") -> None:
        self.name = name
        self.policy = ToolPolicy(group=group, scope=scope)  # type: ignore[arg-type]
        self.calls = 0

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        self.calls += 1
        return arguments


@tool
def wrapped(arguments: dict[str, Any], label: str = "") -> str:
    """A tool that really has a parameter called ``arguments``."""
    return label


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([Echo(), wrapped])


def test_duplicate_names_are_refused_never_overwritten(registry: ToolRegistry) -> None:
    first = registry.get("echo")
    with pytest.raises(ConfigError, match="already registered"):
        registry.register(Echo())
    assert registry.get("echo") is first


def test_invalid_tools_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigError, match="must match"):
        registry.register(Echo(name="bad name"))
    bad = Echo(name="bad_schema")
    bad.parameters = {"type": "object", "properties": {"a": {"type": "nope"}}}
    with pytest.raises(ConfigError, match="bad_schema"):
        registry.register(bad)


def test_lookup_len_contains_unregister(registry: ToolRegistry) -> None:
    assert len(registry) == 2
    assert "echo" in registry
    assert registry.get("nope") is None
    removed = registry.unregister("echo")
    assert removed.name == "echo"
    assert "echo" not in registry
    with pytest.raises(ToolNotFound):
        registry.get_or_raise("echo")


def test_definitions_order_local_first_then_group_then_name() -> None:
    registry = ToolRegistry(
        [
            Echo("zeta", group="peer:b"),
            Echo("beta"),
            Echo("alpha", group="mcp"),
            Echo("gamma", group="peer:a"),
            Echo("alpha2"),
        ]
    )
    names = [(d.policy.group, d.name) for d in registry.definitions()]
    assert names == [
        ("local", "alpha2"),
        ("local", "beta"),
        ("mcp", "alpha"),
        ("peer:a", "gamma"),
        ("peer:b", "zeta"),
    ]
    assert [t.name for t in registry.tools()] == [name for _, name in names]


def test_definitions_are_cached_and_invalidated_on_change(registry: ToolRegistry) -> None:
    first = registry.definitions()
    assert registry.definitions() is first
    registry.register(Echo("another"))
    second = registry.definitions()
    assert second is not first
    assert "another" in [d.name for d in second]
    registry.unregister("another")
    assert registry.definitions() is not second


def test_definitions_are_immutable_copies(registry: ToolRegistry) -> None:
    definition = next(d for d in registry.definitions() if d.name == "echo")
    with pytest.raises(AttributeError):
        definition.name = "x"  # type: ignore[misc]
    definition.parameters["properties"]["times"]["minimum"] = 0  # type: ignore[index]
    with pytest.raises(InvalidArguments):
        registry.prepare_call("echo", {"text": "a", "times": 0})
    assert definition.policy.concurrency_safe is False
    assert definition.description == "Echo the arguments."


def test_near_miss_name_suggests_one_and_does_not_execute(registry: ToolRegistry) -> None:
    echo = registry.get("echo")
    assert isinstance(echo, Echo)
    with pytest.raises(ToolNotFound) as info:
        registry.prepare_call("ecko", {"text": "a"})
    assert str(info.value) == "unknown tool 'ecko'; did you mean 'echo'?"
    with pytest.raises(ToolNotFound, match="did you mean 'echo'"):
        registry.prepare_call("ECHO", {"text": "a"})
    assert echo.calls == 0


def test_unknown_name_never_lists_all_tools() -> None:
    registry = ToolRegistry([Echo(f"tool_{i}") for i in range(50)])
    with pytest.raises(ToolNotFound) as info:
        registry.prepare_call("something_else", {})
    assert str(info.value) == "unknown tool 'something_else'"


def test_json_string_arguments_are_parsed(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("echo", '{"text": "hi", "times": "2"}')
    assert prepared.arguments == {"text": "hi", "times": 2}
    assert prepared.tool is registry.get("echo")


@pytest.mark.parametrize("raw", [None, "", "null"])
def test_empty_arguments_become_an_empty_object(raw: Any) -> None:
    free = Echo("free")
    free.parameters = {"type": "object", "properties": {}}
    assert ToolRegistry([free]).prepare_call("free", raw).arguments == {}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"text": ', "not valid JSON"),
        ('{"text": "a", "times": NaN}', "NaN is not a JSON number"),
        ("[" * 100_000, "not valid JSON"),
        ("[1, 2]", "got an array"),
        ([1, 2], "got an array"),
        ("5", "got a number"),
        (5, "got a number"),
        ('"text"', "got a string"),
        (True, "got a boolean"),
        ({"arguments": [1]}, "got an array"),
    ],
)
def test_non_objects_are_bad_arguments(registry: ToolRegistry, raw: Any, message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        registry.prepare_call("echo", raw)
    assert info.value.kind is ErrorKind.BAD_ARGUMENTS


def test_arguments_wrapper_is_unwrapped(registry: ToolRegistry) -> None:
    assert registry.prepare_call("echo", {"arguments": {"text": "a"}}).arguments == {"text": "a"}
    assert registry.prepare_call("echo", {"arguments": '{"text": "b"}'}).arguments == {"text": "b"}


def test_wrapper_is_kept_for_a_tool_with_an_arguments_parameter(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("wrapped", {"arguments": {"label": "x"}})
    assert prepared.arguments == {"arguments": {"label": "x"}}


def test_invalid_arguments_name_the_path(registry: ToolRegistry) -> None:
    with pytest.raises(InvalidArguments, match=r"^times must be >= 1$"):
        registry.prepare_call("echo", {"text": "a", "times": 0})
    with pytest.raises(InvalidArguments, match=r"^text is required$"):
        registry.prepare_call("echo", {})


def test_filtered_view_hides_tools_as_not_found() -> None:
    registry = ToolRegistry([Echo("open"), Echo("secret", scope="internal")])
    public = registry.public()
    assert "open" in public
    assert "secret" not in public
    assert len(public) == 1
    assert [d.name for d in public.definitions()] == ["open"]
    assert public.get("secret") is None
    with pytest.raises(ToolNotFound) as info:
        public.prepare_call("secret", {"text": "a"})
    assert "did you mean" not in str(info.value)
    assert public.prepare_call("open", {"text": "a"}).arguments == {"text": "a"}
    registry.register(Echo("later"))
    assert "later" in public  # a live view
