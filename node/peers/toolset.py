"""PeerToolset: the peers' skills as a catalog whose contents the peer directory swaps whole.

Readers (the runner, planners, pipelines, the served card) see one immutable
:class:`~node.tooling.catalog.Toolbox` at a time; :meth:`PeerToolset.replace` installs the next
one and bumps ``revision``. Compiled validators of unchanged tools are reused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from node.tooling.catalog import PreparedCall, Toolbox, ToolDefinition
from node.tooling.tool import Tool

__all__ = ["PeerToolset"]


class PeerToolset:
    """A :class:`~node.tooling.catalog.ToolCatalog` of peer tools, replaced on each refresh."""

    def __init__(self) -> None:
        self._box = Toolbox()
        self.revision = 0

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
