"""The Tool contract: a name, a description, a JSON Schema, an async execute, and a policy.

Every tool, whatever defines it (a typed function, a class, a YAML backend, an MCP server, a peer's
skill), ends up as a :class:`Tool`. A catalog validates arguments against ``parameters`` before
``execute`` is ever called, so ``execute`` receives a dict that already matches the schema.
How a tool may run is one frozen :class:`ToolPolicy`, read by the runner; overrides (a card's,
a pipeline's) are ``dataclasses.replace`` of it.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

from node.errors import ConfigError
from node.tooling.isolation import ISOLATION_MODES, Isolation

if TYPE_CHECKING:
    from node.tooling.context import ToolContext

__all__ = ["DEFAULT_MAX_OUTPUT", "DEFAULT_TIMEOUT_S", "TOOL_NAME_PATTERN", "Scope", "Tool",
           "ToolPolicy"]  # fmt: skip

Scope = Literal["public", "internal"]
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT = 32_000  # characters of a result's text form handed back to the caller


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a tool may run, as data.

    - ``read_only``: the tool changes nothing outside itself.
    - ``exclusive``: the tool must never overlap another call, even a read-only one.
    - ``concurrency_safe`` (derived): ``read_only and not exclusive``.
    - ``timeout``: seconds before the call is cancelled and reported as a timeout.
    - ``isolation``: where the work runs, and so what a timeout can stop
      (:mod:`node.tooling.isolation`): ``inline`` on the event loop (async tools, and sync
      functions bounded to microseconds), ``thread`` (a timeout stops the waiting, not the
      thread), ``process`` (a timeout kills the worker process).
    - ``max_output``: characters of output returned inline; the rest goes to the output sink.
    - ``requires``: capabilities the caller must hold.
    - ``cost``: charged to the task's budget before the call runs.
    - ``scope``: ``public`` tools are published as skills; ``internal`` ones only serve the
      node's own planner and pipelines.
    - ``tags`` / ``examples``: shown on the skill.
    - ``group``: ``local`` tools sort first; external groups (``mcp``, ``peer:<id>``) after.

    Iterables given for ``requires``, ``tags`` and ``examples`` are frozen.
    """

    read_only: bool = False
    exclusive: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    isolation: Isolation = "inline"
    max_output: int = DEFAULT_MAX_OUTPUT
    requires: frozenset[str] = frozenset()
    cost: float = 0.0
    scope: Scope = "public"
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    group: str = "local"

    def __post_init__(self) -> None:
        object.__setattr__(self, "requires", frozenset(self.requires))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "examples", tuple(self.examples))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def build(cls, where: str, **values: Any) -> ToolPolicy:
        """A policy from keyword values; an unknown name is a :class:`ConfigError`."""
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ConfigError(f"{where}: unknown policy fields {unknown}")
        return cls(**values)

    @property
    def concurrency_safe(self) -> bool:
        return self.read_only and not self.exclusive

    def check(self, name: str) -> None:
        """Raise :class:`ConfigError` when a value is out of its range."""
        if self.timeout <= 0 or self.max_output <= 0:
            raise ConfigError(f"tool {name!r}: timeout and max_output must be positive")
        if self.isolation not in ISOLATION_MODES:
            modes = ", ".join(ISOLATION_MODES)
            raise ConfigError(f"tool {name!r}: isolation must be one of {modes}")
        if self.scope not in ("public", "internal"):
            raise ConfigError(f"tool {name!r}: scope must be 'public' or 'internal'")


class Tool(ABC):
    """One callable capability.

    Subclasses set ``name``, ``description``, ``parameters`` and ``policy`` (class attributes, or
    in ``__init__``) and implement :meth:`execute`. ``read_only``, ``exclusive``,
    ``concurrency_safe``, ``requires`` and ``scope`` are read-only shortcuts into ``policy``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    policy: ToolPolicy = ToolPolicy()

    @property
    def read_only(self) -> bool:
        return self.policy.read_only

    @property
    def exclusive(self) -> bool:
        return self.policy.exclusive

    @property
    def concurrency_safe(self) -> bool:
        return self.policy.concurrency_safe

    @property
    def requires(self) -> frozenset[str]:
        return self.policy.requires

    @property
    def scope(self) -> Scope:
        return self.policy.scope

    @abstractmethod
    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Run the tool on validated arguments; return text, or JSON-serialisable data.

        Raise :class:`node.errors.ToolError` (or a subclass) for failures the caller should
        read; any other exception is also reported as an error result, but logged as a bug.
        """

    def check(self) -> None:
        """Raise :class:`ConfigError` when the tool's own definition is invalid."""
        if not isinstance(self.name, str) or not TOOL_NAME_PATTERN.match(self.name):
            raise ConfigError(f"tool name {self.name!r} must match {TOOL_NAME_PATTERN.pattern}")
        if not isinstance(self.parameters, Mapping) or self.parameters.get("type") != "object":
            raise ConfigError(f"tool {self.name!r}: parameters must be a JSON Schema object root")
        if not isinstance(self.policy, ToolPolicy):
            raise ConfigError(f"tool {self.name!r}: policy must be a ToolPolicy")
        self.policy.check(self.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
