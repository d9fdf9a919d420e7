"""Finding tools: built-ins in the ``tools`` package, plugins through entry points, YAML tools.

- Built-ins: every module of the package is imported; its module-level :class:`Tool` instances
  (such as ``@tool`` functions) and the items of an optional ``TOOLS`` list are collected. Two
  different built-ins with one name are a :class:`ConfigError` (a bug in the package).
- Plugins: entry points in the group ``a2a_node.tools``; each resolves to a Tool instance, a Tool
  subclass (instantiated without arguments) or a callable returning an iterable of Tools. A plugin
  that fails to load, or whose tool is invalid or takes a name already used, is logged and skipped:
  a plugin never replaces a built-in.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Any

from node.errors import ConfigError
from node.tooling.catalog import Toolbox
from node.tooling.declared import declared_tool
from node.tooling.tool import Tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "build_toolbox",
    "discover_tools",
    "load_builtin_tools",
    "load_plugin_tools",
]

ENTRY_POINT_GROUP = "a2a_node.tools"
logger = logging.getLogger("node.tooling.loader")


def load_builtin_tools(package: str = "tools") -> dict[str, Tool]:
    """The tools defined in ``package`` and its submodules, by name."""
    try:
        root = importlib.import_module(package)
    except ImportError as exc:
        raise ConfigError(f"cannot import the tools package {package!r}: {exc}") from exc
    modules = [root]
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=f"{package}."):
        try:
            modules.append(importlib.import_module(info.name))
        except Exception as exc:
            raise ConfigError(
                f"built-in tool module {info.name!r} failed to import: {exc}"
            ) from exc
    found: dict[str, Tool] = {}
    for module in modules:
        candidates = [v for v in vars(module).values() if isinstance(v, Tool)]
        candidates += list(getattr(module, "TOOLS", ()))
        for tool in candidates:
            if not isinstance(tool, Tool):
                raise ConfigError(f"{module.__name__}.TOOLS holds {tool!r}, not a Tool")
            known = found.get(tool.name)
            if known is not None and known is not tool:
                raise ConfigError(f"two built-in tools are named {tool.name!r}")
            tool.check()
            found[tool.name] = tool
    return found


def _plugin_tools(entry_point: importlib.metadata.EntryPoint) -> list[Tool]:
    target: Any = entry_point.load()
    if isinstance(target, Tool):
        return [target]
    if inspect.isclass(target) and issubclass(target, Tool):
        return [target()]
    if callable(target):
        tools = list(target())
        wrong = [t for t in tools if not isinstance(t, Tool)]
        if wrong:
            raise TypeError(f"returned {wrong[0]!r}, not a Tool")
        return tools
    raise TypeError(f"{target!r} is not a Tool, a Tool class or a callable returning Tools")


def load_plugin_tools(
    group: str = ENTRY_POINT_GROUP, *, reserved: Iterable[str] = ()
) -> dict[str, Tool]:
    """Plugin tools by name; names in ``reserved`` (the built-ins) are never taken."""
    taken = set(reserved)
    found: dict[str, Tool] = {}
    for entry_point in importlib.metadata.entry_points(group=group):
        source = f"plugin {entry_point.name!r} ({entry_point.value})"
        try:
            tools = _plugin_tools(entry_point)
            for tool in tools:
                tool.check()
        except Exception as exc:
            logger.warning("skipping %s: %s: %s", source, type(exc).__name__, exc, exc_info=True)
            continue
        for tool in tools:
            if tool.name in taken or tool.name in found:
                logger.warning("skipping %s: a tool named %r already exists", source, tool.name)
                continue
            found[tool.name] = tool
    return found


def discover_tools(package: str = "tools", group: str = ENTRY_POINT_GROUP) -> dict[str, Tool]:
    """Built-ins and plugins by name (built-ins win every name collision)."""
    builtins = load_builtin_tools(package)
    return {**load_plugin_tools(group, reserved=builtins), **builtins}


def build_toolbox(
    select: Iterable[str] | None = None,
    *,
    declared: Iterable[Mapping[str, Any]] = (),
    package: str = "tools",
    group: str = ENTRY_POINT_GROUP,
) -> Toolbox:
    """A toolbox of the selected discovered tools (all when ``select`` is None) and declared ones.

    An unknown name in ``select`` is a :class:`ConfigError`; so is a declared tool whose name is
    taken.
    """
    available = discover_tools(package, group)
    names = sorted(available) if select is None else list(select)
    tools: list[Tool] = []
    for name in names:
        tool = available.get(name)
        if tool is None:
            raise ConfigError(f"unknown tool {name!r} (not a built-in or an installed plugin)")
        tools.append(tool)
    tools.extend(declared_tool(spec) for spec in declared)
    return Toolbox(tools)
