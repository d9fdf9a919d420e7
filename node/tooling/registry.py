"""The registry: tools by exact name, and the only way from raw arguments to a runnable call.

:meth:`ToolRegistry.prepare_call` resolves the name exactly (a "did you mean" hint is only ever a
hint), turns raw arguments into a JSON object, casts safe scalars and validates against the
validator compiled at registration. Nothing runs before all of that succeeded.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node.errors import ConfigError, ErrorKind, ToolError, ToolNotFound
from node.tooling.schema import ArgumentSchema, compile_schema
from node.tooling.tool import Tool, ToolPolicy

__all__ = [
    "FilteredRegistry",
    "PreparedCall",
    "ToolCatalog",
    "ToolDefinition",
    "ToolRegistry",
]

_MAX_NAME_IN_MESSAGE = 80


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What a planner, a card or a model sees of a tool (``parameters`` is a private copy)."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    policy: ToolPolicy


@dataclass(slots=True)
class PreparedCall:
    """A tool and arguments that passed its schema: ready to run."""

    tool: Tool
    arguments: dict[str, Any]


class ToolCatalog(Protocol):
    """What the runner and planners need from a registry or a view of one."""

    def get(self, name: str) -> Tool | None: ...
    def __contains__(self, name: object) -> bool: ...
    def __len__(self) -> int: ...
    def definitions(self) -> tuple[ToolDefinition, ...]: ...
    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall: ...


@dataclass(frozen=True, slots=True)
class _Entry:
    tool: Tool
    schema: ArgumentSchema
    unwrap: bool  # an {"arguments": {...}} wrapper is unwrapped (the tool has no such parameter)


def _sort_key(tool: Tool) -> tuple[bool, str, str]:
    group = tool.policy.group
    return (group != "local", group, tool.name)


class ToolRegistry:
    """Tools by exact name; registration compiles each tool's validator once."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._entries: dict[str, _Entry] = {}
        self._definitions: tuple[ToolDefinition, ...] | None = None
        self.version = 0  # bumped on every change; views cache against it
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; a duplicate name is a :class:`ConfigError`, never an overwrite."""
        tool.check()
        if tool.name in self._entries:
            raise ConfigError(f"a tool named {tool.name!r} is already registered")
        try:
            schema = compile_schema(tool.parameters)
        except ConfigError as exc:
            raise ConfigError(f"tool {tool.name!r}: {exc}") from exc
        properties = schema.schema.get("properties") or {}
        self._entries[tool.name] = _Entry(tool, schema, "arguments" not in properties)
        self._changed()

    def unregister(self, name: str) -> Tool:
        """Remove and return the tool called ``name`` (``KeyError`` when absent)."""
        entry = self._entries.pop(name)
        self._changed()
        return entry.tool

    def _changed(self) -> None:
        self._definitions = None
        self.version += 1

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return None if entry is None else entry.tool

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools())

    def tools(self) -> tuple[Tool, ...]:
        """The registered tools, in :meth:`definitions` order."""
        return tuple(sorted((e.tool for e in self._entries.values()), key=_sort_key))

    def get_or_raise(self, name: str) -> Tool:
        """The tool called ``name``, or :class:`ToolNotFound` (with a hint)."""
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(not_found_message(name, self._entries))
        return entry.tool

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """Every tool's definition: ``local`` first by name, then by group and name (cached)."""
        if self._definitions is None:
            entries = sorted(self._entries.values(), key=lambda e: _sort_key(e.tool))
            self._definitions = tuple(
                ToolDefinition(
                    e.tool.name,
                    str(e.tool.description),
                    json.loads(json.dumps(e.schema.schema)),
                    e.tool.policy,
                )
                for e in entries
            )
        return self._definitions

    def filtered(self, predicate: Callable[[Tool], bool]) -> FilteredRegistry:
        """A live view showing only the tools ``predicate`` accepts."""
        return FilteredRegistry(self, predicate)

    def public(self) -> FilteredRegistry:
        """The tools remote callers may see and call (``scope == "public"``)."""
        return self.filtered(lambda tool: tool.scope == "public")

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        """Resolve ``name`` exactly, parse, cast and validate ``raw_arguments``."""
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(not_found_message(name, self._entries))
        return _prepare(entry, raw_arguments)

    def _entry(self, name: str) -> _Entry | None:
        return self._entries.get(name)


class FilteredRegistry:
    """A view of a registry hiding the tools a predicate rejects (hidden means not found)."""

    def __init__(self, registry: ToolRegistry, predicate: Callable[[Tool], bool]) -> None:
        self._registry = registry
        self._predicate = predicate
        self._cache: tuple[int, tuple[ToolDefinition, ...], frozenset[str]] | None = None

    def _view(self) -> tuple[tuple[ToolDefinition, ...], frozenset[str]]:
        if self._cache is None or self._cache[0] != self._registry.version:
            defs = tuple(
                d
                for d in self._registry.definitions()
                if self._predicate(self._registry._entries[d.name].tool)
            )
            self._cache = (self._registry.version, defs, frozenset(d.name for d in defs))
        return self._cache[1], self._cache[2]

    def get(self, name: str) -> Tool | None:
        return self._registry.get(name) if name in self._view()[1] else None

    def __contains__(self, name: object) -> bool:
        return name in self._view()[1]

    def __len__(self) -> int:
        return len(self._view()[1])

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return self._view()[0]

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        names = self._view()[1]
        entry = self._registry._entry(name) if name in names else None
        if entry is None:
            raise ToolNotFound(not_found_message(name, names))
        return _prepare(entry, raw_arguments)


def not_found_message(name: str, names: Mapping[str, Any] | frozenset[str]) -> str:
    """``unknown tool 'x'``, with at most one close name as a hint (never the whole list)."""
    shown = name if len(name) <= _MAX_NAME_IN_MESSAGE else name[:_MAX_NAME_IN_MESSAGE] + "…"
    lowered = {n.lower(): n for n in names}
    match = lowered.get(name.lower())
    if match is None and len(name) <= 128:
        close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
        match = close[0] if close else None
    hint = f"; did you mean {match!r}?" if match else ""
    return f"unknown tool {shown!r}{hint}"


def _bad(message: str) -> ToolError:
    return ToolError(message, kind=ErrorKind.BAD_ARGUMENTS)


def _as_object(raw: Any) -> dict[str, Any]:
    if type(raw) is dict:
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise _bad(f"arguments are not valid JSON: {exc}") from None
        if raw is None:
            return {}
        if type(raw) is dict:
            return raw
    if isinstance(raw, Mapping):
        return dict(raw)
    raise _bad(f"arguments must be a JSON object, got {_json_kind(raw)}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_kind(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str | bytes) else type(value).__name__


def _prepare(entry: _Entry, raw_arguments: Any) -> PreparedCall:
    arguments = raw_arguments if type(raw_arguments) is dict else _as_object(raw_arguments)
    if entry.unwrap and "arguments" in arguments and len(arguments) == 1:
        arguments = _as_object(arguments["arguments"])
    return PreparedCall(entry.tool, entry.schema.check(arguments))
