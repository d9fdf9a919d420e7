"""Assemble a node's tools from its card: built-ins, plugins, declared tools, pipelines, guards.

The card lists which tools to load (``tools:``), optionally overriding their policy, and declares
schema-first tools (``declared_tools:``). Public tools are the node's skills; peers' tools are
added later by the peer directory (internal unless a peer is exposed).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from node.card import NodeCard, ToolRef
from node.errors import ConfigError
from node.pipeline import pipeline_tool
from node.server.agent_card import SkillSpec
from node.tooling import Tool, ToolRegistry
from node.tooling.declared import declared_tool
from node.tooling.guards.paths import Workspace
from node.tooling.guards.urls import UrlGuard
from node.tooling.loader import discover_tools


@dataclass(slots=True)
class NodeTools:
    """The registry plus the guards the node's tools run under."""

    registry: ToolRegistry
    workspace: Workspace
    url_guard: UrlGuard
    _skills: tuple[object, Mapping[str, Tool]] = (None, {})

    def skills(self) -> Mapping[str, Tool]:
        """Public tools by name: what remote callers may call (recomputed when tools change)."""
        definitions = self.registry.definitions()  # the same object until the registry changes
        if self._skills[0] is not definitions:
            self._skills = (definitions, {str(t.name): t for t in self.public_definitions()})
        return self._skills[1]

    def public_definitions(self) -> list[Tool]:
        return [t for t in self.registry.tools() if t.scope == "public"]

    def skill_specs(self) -> list[SkillSpec]:
        return [
            SkillSpec(
                id=str(t.name),
                name=str(t.name).replace("_", " "),
                description=str(t.description),
                input_schema=t.parameters,
                tags=t.policy.tags,
                examples=t.policy.examples,
                requires=t.policy.requires,
            )
            for t in self.public_definitions()
        ]


def _apply(tool: Tool, ref: ToolRef) -> Tool:
    """``tool``, or a copy of it under the card's policy overrides."""
    policy = ref.apply(tool.policy)
    if policy is tool.policy:
        return tool
    tool = copy.copy(tool)
    tool.policy = policy
    return tool


def assemble_tools(card: NodeCard, data_dir: Path, extra_tools: Iterable[Tool] = ()) -> NodeTools:
    """Build the node's tool registry and guards from its card (creates the workspace folder).

    ``extra_tools`` are registered as given, beside the card's: the Python API's way to add tools.
    """
    available = discover_tools()
    registry = ToolRegistry(extra_tools)
    for ref in card.tool_refs():
        found = available.get(ref.name)
        if found is None:
            raise ConfigError(f"card {card.id!r}: unknown tool {ref.name!r}")
        registry.register(_apply(found, ref))
    for spec in card.declared_tools:
        registry.register(declared_tool(spec.model_dump(exclude_none=True)))
    for pipeline in card.pipelines:
        registry.register(pipeline_tool(pipeline, registry))
    root = data_dir / card.workspace.root
    root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(root, read_roots=card.workspace.read_roots)
    return NodeTools(registry, workspace, UrlGuard(allow_cidrs=card.network.allow_cidrs))
