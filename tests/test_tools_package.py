"""Completeness of the built-in tools package: every module offers valid, described tools."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import fastjsonschema
import pytest

import tools
from node.tooling import Tool

REPO = Path(__file__).resolve().parent.parent
MODULES = sorted(m.name for m in pkgutil.iter_modules(tools.__path__) if not m.name.startswith("_"))


def _tools(module: ModuleType) -> list[Tool]:
    return [value for value in vars(module).values() if isinstance(value, Tool)]


ALL_TOOLS = [t for name in MODULES for t in _tools(importlib.import_module(f"tools.{name}"))]


def test_tools_is_this_repositorys_package() -> None:
    assert Path(tools.__file__ or "").resolve() == REPO / "tools" / "__init__.py"


def test_the_package_has_the_expected_modules() -> None:
    assert MODULES == ["calculator", "files", "json_query", "text", "web"]


@pytest.mark.parametrize("name", MODULES)
def test_every_module_exposes_a_tool(name: str) -> None:
    assert _tools(importlib.import_module(f"tools.{name}"))


def test_tool_names_are_unique() -> None:
    names = [t.name for t in ALL_TOOLS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_every_tool_is_well_formed(tool: Tool) -> None:
    tool.check()
    assert tool.description.strip()
    assert tool.parameters["type"] == "object"
    assert tool.parameters.get("additionalProperties") is False
    fastjsonschema.compile(dict(tool.parameters))
    for name, schema in tool.parameters["properties"].items():
        assert schema.get("description"), f"{tool.name}.{name} has no description"
    assert "ctx" not in tool.parameters["properties"]
