"""The Tool contract: a name, a description, a JSON Schema, an async execute, and policy as data.

Every tool, whatever defines it (a typed function, a class, a YAML backend, an MCP server, a peer's
skill), ends up as a :class:`Tool`. The registry validates arguments against ``parameters`` before
``execute`` is ever called, so ``execute`` receives a dict that already matches the schema.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from node.errors import ConfigError
from node.tooling.isolation import ISOLATION_MODES, Isolation

if TYPE_CHECKING:
    from node.tooling.context import ToolContext

Scope = Literal["public", "internal"]
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_OUTPUT = 32_000  # characters of a result's text form handed back to the caller


class Tool(ABC):
    """One callable capability.

    Subclasses set the class attributes (or pass them to ``__init__``) and implement
    :meth:`execute`. Policy is data, read by the runner:

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
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = False
    exclusive: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    isolation: Isolation = "inline"  # execute() runs on the loop unless the tool moves its work
    max_output: int = DEFAULT_MAX_OUTPUT
    requires: frozenset[str] = frozenset()
    cost: float = 0.0
    scope: Scope = "public"
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    group: str = "local"  # "local" tools sort first; external groups ("mcp", "peer:<id>") after

    @property
    def concurrency_safe(self) -> bool:
        return self.read_only and not self.exclusive

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
        if self.timeout <= 0 or self.max_output <= 0:
            raise ConfigError(f"tool {self.name!r}: timeout and max_output must be positive")
        if self.isolation not in ISOLATION_MODES:
            modes = ", ".join(ISOLATION_MODES)
            raise ConfigError(f"tool {self.name!r}: isolation must be one of {modes}")
        if self.scope not in ("public", "internal"):
            raise ConfigError(f"tool {self.name!r}: scope must be 'public' or 'internal'")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
