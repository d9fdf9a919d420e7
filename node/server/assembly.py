"""Assemble a node's tools from its card: built-ins, plugins, declared tools, pipelines, guards.

The card lists which tools to load (``tools:``), optionally overriding their policy, and declares
schema-first tools (``declared_tools:``). These local tools are fixed once assembled (a
:class:`Toolbox`); the peers' tools live in a :class:`PeerToolset` the peer directory refreshes,
and the MCP servers' tools in an :class:`McpToolset` refreshed on each (re)connection.
The node's catalog is all three, local first. Public tools are the node's skills.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from node.card import NodeCard, ToolRef
from node.errors import ConfigError
from node.mcp.toolset import McpToolset
from node.peers.toolset import PeerToolset
from node.pipeline import pipeline_tool
from node.server.agent_card import SkillSpec
from node.tooling import CombinedCatalog, Tool, Toolbox
from node.tooling.catalog import public
from node.tooling.declared import declared_tool
from node.tooling.guards.paths import Workspace
from node.tooling.guards.urls import UrlGuard
from node.tooling.loader import discover_tools


@dataclass(slots=True)
class NodeTools:
    """The node's tools (local and peers', as one catalog) and the guards they run under."""

    local: Toolbox
    peers: PeerToolset
    workspace: Workspace
    url_guard: UrlGuard
    mcp: McpToolset = field(default_factory=lambda: McpToolset(()))
    catalog: CombinedCatalog = field(init=False)
    _skills: tuple[Hashable, Mapping[str, Tool]] = ((), {})

    def __post_init__(self) -> None:
        self.catalog = CombinedCatalog(self.local, self.mcp, self.peers)
        self._skills = (None, {})

    @property
    def revision(self) -> Hashable:
        """Changes whenever the node's tools do (the served card is rebuilt then)."""
        return self.catalog.revision

    def skills(self) -> Mapping[str, Tool]:
        """Public tools by name: what remote callers may call (recomputed when tools change)."""
        revision = self.catalog.revision
        if self._skills[0] != revision:
            self._skills = (revision, {t.name: t for t in self.public_tools()})
        return self._skills[1]

    def public_tools(self) -> list[Tool]:
        found = (self.catalog.get(d.name) for d in public(self.catalog).definitions())
        return [t for t in found if t is not None]

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
            for t in self.public_tools()
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
    """Build the node's tools and guards from its card (creates the workspace folder).

    ``extra_tools`` are added as given, beside the card's: the Python API's way to add tools.
    A pipeline step naming no local tool is looked up among the peers' tools when it runs
    (peers may also come from the command line: ``serve --registry``).
    """
    available = discover_tools()
    tools = list(extra_tools)
    for ref in card.tool_refs():
        found = available.get(ref.name)
        if found is None:
            raise ConfigError(f"card {card.id!r}: unknown tool {ref.name!r}")
        tools.append(_apply(found, ref))
    tools.extend(declared_tool(spec.model_dump(exclude_none=True)) for spec in card.declared_tools)
    local = Toolbox(tools)
    peers = PeerToolset()
    url_guard = UrlGuard(allow_cidrs=card.network.allow_cidrs)
    mcp = McpToolset(card.mcp_servers, url_guard)
    remote = CombinedCatalog(mcp, peers)  # tools that come and go
    for pipeline in card.pipelines:  # each sees the local tools before it, MCP and peer tools
        local = local.extended([pipeline_tool(pipeline, local, remote)])
    root = data_dir / card.workspace.root
    root.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(root, read_roots=card.workspace.read_roots)
    return NodeTools(local, peers, workspace, url_guard, mcp)
