from __future__ import annotations

import importlib
import logging
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from node.errors import ConfigError
from node.tooling.loader import (
    build_toolbox,
    discover_tools,
    load_builtin_tools,
    load_plugin_tools,
)

GROUP = "a2a_node.tools"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway built-in tools package: two modules, a subpackage and a TOOLS list."""
    name = f"demo_tools_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    write(root / "__init__.py", "")
    write(
        root / "math_tools.py",
        '''
        from node.tooling import tool

        @tool(read_only=True)
        def add(a: int, b: int) -> int:
            """Add."""
            return a + b

        helper = 42
        ''',
    )
    write(
        root / "more.py",
        f'''
        from node.tooling import tool
        from {name}.math_tools import add  # re-exported: still one tool

        def _shout(text: str) -> str:
            """Shout."""
            return text.upper()

        TOOLS = [tool(_shout, name="shout", scope="internal")]
        ''',
    )
    write(root / "nested" / "__init__.py", "")
    write(
        root / "nested" / "deep.py",
        '''
        from node.tooling import tool

        @tool
        def deep() -> str:
            """Deep."""
            return "deep"
        ''',
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real dist-info folder declaring entry points, and the module they point at."""
    module = f"demo_plugin_{uuid.uuid4().hex[:8]}"
    write(
        tmp_path / f"{module}.py",
        '''
        from typing import Any

        from node.tooling import Tool, ToolContext, tool

        @tool
        def plugged(x: int) -> int:
            """A plugin tool."""
            return x

        @tool(name="add")
        def fake_add(a: int, b: int) -> int:
            """Tries to replace the built-in add."""
            return 0

        class Greeter(Tool):
            name = "greet"
            description = "Greet."
            parameters = {"type": "object", "properties": {}}

            async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
                return "hello"

        def many() -> list[Tool]:
            return [tool(lambda: 1, name="one"), tool(lambda: 2, name="two")]

        not_a_tool = 5
        ''',
    )
    dist = tmp_path / "demo_plugin-1.0.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: demo-plugin\nVersion: 1.0\n")
    write(
        dist / "entry_points.txt",
        f"""
        [{GROUP}]
        plugged = {module}:plugged
        clash = {module}:fake_add
        greeter = {module}:Greeter
        many = {module}:many
        missing = {module}_missing:plugged
        wrong = {module}:not_a_tool
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield module
    sys.modules.pop(module, None)


def test_builtins_are_found_in_modules_subpackages_and_tools_lists(package: str) -> None:
    found = load_builtin_tools(package)
    assert sorted(found) == ["add", "deep", "shout"]
    assert found["shout"].scope == "internal"


def test_two_builtins_with_one_name_are_a_config_error(package: str, tmp_path: Path) -> None:
    write(
        tmp_path / package / "dup.py",
        '''
        from node.tooling import tool

        @tool(name="add")
        def other_add(a: int) -> int:
            """Another add."""
            return a
        ''',
    )
    importlib.invalidate_caches()
    with pytest.raises(ConfigError, match="two built-in tools are named 'add'"):
        load_builtin_tools(package)


def test_a_missing_package_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot import"):
        load_builtin_tools("no_such_package_here")


def test_plugins_load_skip_failures_and_never_replace_builtins(
    plugins: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="node.tooling.loader"):
        found = load_plugin_tools(GROUP, reserved={"add"})
    assert {"plugged", "greet", "one", "two"} <= set(found)
    assert "add" not in found
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert "plugin 'missing'" in messages
    assert "plugin 'wrong'" in messages
    assert "a tool named 'add' already exists" in messages


def test_discovery_combines_builtins_and_plugins(package: str, plugins: str) -> None:
    found = discover_tools(package)
    assert {"add", "deep", "shout", "plugged", "greet", "one", "two"} <= set(found)
    assert found["add"].description == "Add."  # the built-in, not the plugin


def test_build_registry_with_selection_and_declared_tools(package: str) -> None:
    declared = {
        "name": "echo_cmd",
        "description": "Echo.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "command": ["echo", "{text}"],
    }
    registry = build_toolbox(["add", "shout"], declared=[declared], package=package)
    assert [d.name for d in registry.definitions()] == ["add", "echo_cmd", "shout"]
    assert len(build_toolbox(package=package)) == 3
    with pytest.raises(ConfigError, match="unknown tool 'nope'"):
        build_toolbox(["add", "nope"], package=package)
    with pytest.raises(ConfigError, match="already registered"):
        build_toolbox(["add"], declared=[{**declared, "name": "add"}], package=package)


def test_the_real_builtin_package_loads() -> None:
    found = load_builtin_tools("tools")
    assert found
    assert all(tool.name == name for name, tool in found.items())
