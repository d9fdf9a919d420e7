"""Tool catalogs: tools by exact name, and the only way from raw arguments to a runnable call.

A :class:`ToolCatalog` is what the runner, planners and pipelines read. :class:`Toolbox` is an
immutable set of tools whose validators are compiled once, when it is built; a toolset that
changes (a peer's skills, an MCP server's tools) swaps in a new :class:`Toolbox` and bumps its
``revision``. :class:`CombinedCatalog` puts several catalogs side by side (the node's own tools
first) and :class:`FilteredCatalog` hides the tools a predicate rejects (hidden means not found).

A swappable catalog may be given a ``reload`` (the peer directory's bounded refresh):
:func:`look_again` asks for it when a name is missing, for callers that need a tool now (a
pipeline step naming a peer that registered after the last poll).

``prepare_call`` resolves the name exactly (a "did you mean" hint is only ever a hint), turns raw
arguments into a JSON object, casts safe scalars and validates against the compiled validator.
Nothing runs before all of that succeeded.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from node.errors import BadArguments, ConfigError, ToolNotFound
from node.tooling.schema import ArgumentSchema, compile_schema
from node.tooling.tool import Tool, ToolPolicy

__all__ = [
    "CombinedCatalog",
    "FilteredCatalog",
    "PreparedCall",
    "SwappableCatalog",
    "ToolCatalog",
    "ToolDefinition",
    "Toolbox",
    "look_again",
    "not_found_message",
    "public",
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
    """What the runner, planners and pipelines need from a set of tools.

    ``revision`` changes whenever the set of tools does (compare it, never the definitions).
    """

    @property
    def revision(self) -> Hashable: ...
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
    definition: ToolDefinition


def _sort_key(definition: ToolDefinition) -> tuple[bool, str, str]:
    group = definition.policy.group
    return (group != "local", group, definition.name)


def _entry(tool: Tool) -> _Entry:
    tool.check()
    try:
        schema = compile_schema(tool.parameters)
    except ConfigError as exc:
        raise ConfigError(f"tool {tool.name!r}: {exc}") from exc
    properties = schema.schema.get("properties") or {}
    parameters = json.loads(json.dumps(schema.schema))
    definition = ToolDefinition(tool.name, str(tool.description), parameters, tool.policy)
    return _Entry(tool, schema, "arguments" not in properties, definition)


class Toolbox:
    """An immutable set of tools by exact name; building it compiles each validator once.

    A duplicate name is a :class:`ConfigError`, never an overwrite. ``reuse``: a previous
    toolbox whose compiled entries are kept for the very same tool objects.
    """

    revision = 0  # a toolbox never changes

    def __init__(self, tools: Iterable[Tool] = (), *, reuse: Toolbox | None = None) -> None:
        known: dict[str, _Entry] = reuse._entries if reuse is not None else {}
        entries: dict[str, _Entry] = {}
        for tool in tools:
            if tool.name in entries:
                raise ConfigError(f"a tool named {tool.name!r} is already registered")
            old = known.get(tool.name)
            entries[tool.name] = (
                old if old is not None and old.tool is tool and old.definition.policy is tool.policy
                else _entry(tool)
            )  # fmt: skip
        self._entries: dict[str, _Entry] = entries
        ordered = sorted(entries.values(), key=lambda e: _sort_key(e.definition))
        self._definitions = tuple(e.definition for e in ordered)
        self._tools = tuple(e.tool for e in ordered)

    def extended(self, tools: Iterable[Tool]) -> Toolbox:
        """A new toolbox holding these tools and ``tools`` (compiled entries are reused)."""
        return Toolbox([*self._tools, *tools], reuse=self)

    def get(self, name: str) -> Tool | None:
        entry = self._entries.get(name)
        return None if entry is None else entry.tool

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def tools(self) -> tuple[Tool, ...]:
        """The tools, in :meth:`definitions` order."""
        return self._tools

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """Every tool's definition: ``local`` first by name, then by group and name."""
        return self._definitions

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        """Resolve ``name`` exactly, parse, cast and validate ``raw_arguments``."""
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(not_found_message(name, self._entries))
        return _prepare(entry, raw_arguments)


class SwappableCatalog:
    """A catalog whose whole contents are swapped: readers see one immutable :class:`Toolbox` at a
    time; :meth:`replace` installs the next one (reusing compiled validators of unchanged tools)
    and bumps ``revision``, so the served card is rebuilt. Peers and MCP servers are such sets."""

    def __init__(self) -> None:
        self._box = Toolbox()
        self.revision = 0
        self.reload: Callable[[], Awaitable[object]] | None = None  # its owner's refresh

    async def look_again(self, name: str) -> bool:
        """Whether ``name`` is here, after one :attr:`reload` when it was not (and one is set).

        The owner bounds its reload (coalesced, rate-limited): a missing name may ask often.
        """
        if name not in self._box and self.reload is not None:
            await self.reload()
        return name in self._box

    def replace(self, tools: Iterable[Tool]) -> None:
        """Install ``tools`` as the whole set (``ConfigError`` on a duplicate name)."""
        self._box = Toolbox(tools, reuse=self._box)
        self.revision += 1

    def tools(self) -> tuple[Tool, ...]:
        return self._box.tools()

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._box)

    def get(self, name: str) -> Tool | None:
        return self._box.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._box

    def __len__(self) -> int:
        return len(self._box)

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return self._box.definitions()

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        return self._box.prepare_call(name, raw_arguments)


class CombinedCatalog:
    """Several catalogs as one; the first that has a name wins it (list the node's own first)."""

    def __init__(self, *catalogs: ToolCatalog) -> None:
        self._catalogs = catalogs
        self._cache: tuple[Hashable, tuple[ToolDefinition, ...], frozenset[str]] | None = None

    @property
    def revision(self) -> Hashable:
        return tuple(c.revision for c in self._catalogs)

    def _view(self) -> tuple[tuple[ToolDefinition, ...], frozenset[str]]:
        revision = self.revision
        if self._cache is None or self._cache[0] != revision:
            seen: dict[str, ToolDefinition] = {}
            for catalog in self._catalogs:
                for d in catalog.definitions():
                    seen.setdefault(d.name, d)
            defs = tuple(sorted(seen.values(), key=_sort_key))
            self._cache = (revision, defs, frozenset(seen))
        return self._cache[1], self._cache[2]

    def _owner(self, name: str) -> ToolCatalog | None:
        return next((c for c in self._catalogs if name in c), None)

    async def look_again(self, name: str) -> bool:
        """Whether a part has ``name``, once the parts that can reload (:func:`look_again`) did."""
        if name in self:
            return True
        for catalog in self._catalogs:
            if await look_again(catalog, name):
                return True
        return False

    def get(self, name: str) -> Tool | None:
        owner = self._owner(name)
        return None if owner is None else owner.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._owner(name) is not None

    def __len__(self) -> int:
        return len(self._view()[1])

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return self._view()[0]

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        owner = self._owner(name)
        if owner is None:
            raise ToolNotFound(not_found_message(name, self._view()[1]))
        return owner.prepare_call(name, raw_arguments)


class FilteredCatalog:
    """A live view of a catalog hiding the tools ``predicate`` rejects (hidden means not found)."""

    def __init__(self, inner: ToolCatalog, predicate: Callable[[ToolDefinition], bool]) -> None:
        self._inner = inner
        self._predicate = predicate
        self._cache: tuple[Hashable, tuple[ToolDefinition, ...], frozenset[str]] | None = None

    @property
    def revision(self) -> Hashable:
        return self._inner.revision

    def _view(self) -> tuple[tuple[ToolDefinition, ...], frozenset[str]]:
        revision = self._inner.revision
        if self._cache is None or self._cache[0] != revision:
            defs = tuple(d for d in self._inner.definitions() if self._predicate(d))
            self._cache = (revision, defs, frozenset(d.name for d in defs))
        return self._cache[1], self._cache[2]

    def get(self, name: str) -> Tool | None:
        return self._inner.get(name) if name in self._view()[1] else None

    def __contains__(self, name: object) -> bool:
        return name in self._view()[1]

    def __len__(self) -> int:
        return len(self._view()[1])

    def definitions(self) -> tuple[ToolDefinition, ...]:
        return self._view()[0]

    def prepare_call(self, name: str, raw_arguments: Any) -> PreparedCall:
        names = self._view()[1]
        if name not in names:
            raise ToolNotFound(not_found_message(name, names))
        return self._inner.prepare_call(name, raw_arguments)


async def look_again(catalog: ToolCatalog, name: str) -> bool:
    """Whether ``catalog`` has ``name``; when not, its reloadable parts refresh once first."""
    if name in catalog:
        return True
    if isinstance(catalog, SwappableCatalog | CombinedCatalog):
        return await catalog.look_again(name)
    return False


def public(catalog: ToolCatalog) -> FilteredCatalog:
    """The tools remote callers may see and call (``scope == "public"``)."""
    return FilteredCatalog(catalog, lambda d: d.policy.scope == "public")


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


def _bad(message: str) -> BadArguments:
    return BadArguments(message)


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
