from __future__ import annotations

from typing import Any

import pytest

from node.errors import ConfigError, ErrorKind, InvalidArguments, ToolError, ToolNotFound
from node.peers.toolset import PeerToolset
from node.tooling import CombinedCatalog, Tool, Toolbox, ToolContext, ToolPolicy, tool
from node.tooling.catalog import public as catalog_public


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
def registry() -> Toolbox:
    return Toolbox([Echo(), wrapped])


def test_duplicate_names_are_refused_never_overwritten(registry: Toolbox) -> None:
    with pytest.raises(ConfigError, match="already registered"):
        Toolbox([Echo(), Echo()])
    with pytest.raises(ConfigError, match="already registered"):
        registry.extended([Echo()])


def test_invalid_tools_are_refused() -> None:
    with pytest.raises(ConfigError, match="must match"):
        Toolbox([Echo(name="bad name")])
    bad = Echo(name="bad_schema")
    bad.parameters = {"type": "object", "properties": {"a": {"type": "nope"}}}
    with pytest.raises(ConfigError, match="bad_schema"):
        Toolbox([bad])


def test_lookup_len_contains(registry: Toolbox) -> None:
    assert len(registry) == 2
    assert "echo" in registry
    assert registry.get("nope") is None
    assert [t.name for t in registry] == ["echo", "wrapped"]
    with pytest.raises(ToolNotFound):
        registry.prepare_call("nope", {})


def test_definitions_order_local_first_then_group_then_name() -> None:
    registry = Toolbox(
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


def test_a_toolbox_never_changes_and_extending_reuses_compiled_entries(registry: Toolbox) -> None:
    first = registry.definitions()
    assert registry.definitions() is first
    more = registry.extended([Echo("another")])
    assert "another" in more and "another" not in registry
    assert registry.definitions() is first
    assert more.definitions()[1] is first[0]  # the same compiled definition ("echo")
    assert registry.revision == more.revision == 0


def test_combined_catalog_puts_catalogs_side_by_side_first_wins() -> None:
    local = Toolbox([Echo("echo"), Echo("shared")])
    peers = PeerToolset()
    both = CombinedCatalog(local, peers)
    start = both.revision
    assert [d.name for d in both.definitions()] == ["echo", "shared"]
    peers.replace([Echo("remote", group="peer:b"), Echo("shared", group="peer:b")])
    assert both.revision != start
    assert [d.name for d in both.definitions()] == ["echo", "shared", "remote"]
    assert both.get("shared") is local.get("shared")
    assert both.prepare_call("remote", {"text": "a"}).tool is peers.get("remote")
    with pytest.raises(ToolNotFound, match="did you mean 'remote'"):
        both.prepare_call("remotee", {})
    peers.replace([])
    assert "remote" not in both and len(both) == 2


def test_a_peer_toolset_keeps_compiled_entries_of_unchanged_tools() -> None:
    peers = PeerToolset()
    kept = Echo("kept")
    peers.replace([kept])
    first = peers.definitions()[0]
    peers.replace([kept, Echo("new")])
    assert peers.definitions()[0] is first
    assert peers.revision == 2


def test_definitions_are_immutable_copies(registry: Toolbox) -> None:
    definition = next(d for d in registry.definitions() if d.name == "echo")
    with pytest.raises(AttributeError):
        definition.name = "x"  # type: ignore[misc]
    definition.parameters["properties"]["times"]["minimum"] = 0  # type: ignore[index]
    with pytest.raises(InvalidArguments):
        registry.prepare_call("echo", {"text": "a", "times": 0})
    assert definition.policy.concurrency_safe is False
    assert definition.description == "Echo the arguments."


def test_near_miss_name_suggests_one_and_does_not_execute(registry: Toolbox) -> None:
    echo = registry.get("echo")
    assert isinstance(echo, Echo)
    with pytest.raises(ToolNotFound) as info:
        registry.prepare_call("ecko", {"text": "a"})
    assert str(info.value) == "unknown tool 'ecko'; did you mean 'echo'?"
    with pytest.raises(ToolNotFound, match="did you mean 'echo'"):
        registry.prepare_call("ECHO", {"text": "a"})
    assert echo.calls == 0


def test_unknown_name_never_lists_all_tools() -> None:
    registry = Toolbox([Echo(f"tool_{i}") for i in range(50)])
    with pytest.raises(ToolNotFound) as info:
        registry.prepare_call("something_else", {})
    assert str(info.value) == "unknown tool 'something_else'"


def test_json_string_arguments_are_parsed(registry: Toolbox) -> None:
    prepared = registry.prepare_call("echo", '{"text": "hi", "times": "2"}')
    assert prepared.arguments == {"text": "hi", "times": 2}
    assert prepared.tool is registry.get("echo")


@pytest.mark.parametrize("raw", [None, "", "null"])
def test_empty_arguments_become_an_empty_object(raw: Any) -> None:
    free = Echo("free")
    free.parameters = {"type": "object", "properties": {}}
    assert Toolbox([free]).prepare_call("free", raw).arguments == {}


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
def test_non_objects_are_bad_arguments(registry: Toolbox, raw: Any, message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        registry.prepare_call("echo", raw)
    assert info.value.kind is ErrorKind.BAD_ARGUMENTS


def test_arguments_wrapper_is_unwrapped(registry: Toolbox) -> None:
    assert registry.prepare_call("echo", {"arguments": {"text": "a"}}).arguments == {"text": "a"}
    assert registry.prepare_call("echo", {"arguments": '{"text": "b"}'}).arguments == {"text": "b"}


def test_wrapper_is_kept_for_a_tool_with_an_arguments_parameter(registry: Toolbox) -> None:
    prepared = registry.prepare_call("wrapped", {"arguments": {"label": "x"}})
    assert prepared.arguments == {"arguments": {"label": "x"}}


def test_invalid_arguments_name_the_path(registry: Toolbox) -> None:
    with pytest.raises(InvalidArguments, match=r"^times must be >= 1$"):
        registry.prepare_call("echo", {"text": "a", "times": 0})
    with pytest.raises(InvalidArguments, match=r"^text is required$"):
        registry.prepare_call("echo", {})


def test_filtered_view_hides_tools_as_not_found() -> None:
    local = Toolbox([Echo("open"), Echo("secret", scope="internal")])
    peers = PeerToolset()
    public = catalog_public(CombinedCatalog(local, peers))
    assert "open" in public
    assert "secret" not in public
    assert len(public) == 1
    assert [d.name for d in public.definitions()] == ["open"]
    assert public.get("secret") is None
    with pytest.raises(ToolNotFound) as info:
        public.prepare_call("secret", {"text": "a"})
    assert "did you mean" not in str(info.value)
    assert public.prepare_call("open", {"text": "a"}).arguments == {"text": "a"}
    peers.replace([Echo("later")])
    assert "later" in public  # a live view
