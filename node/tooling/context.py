"""What a running tool may know about its call: who asked, what they may do, and shared services.

The context is built once per task by the executor (or by the CLI for local calls) and handed to
every call; the tooling engine itself knows nothing of A2A or HTTP serving.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from node.tooling.budget import CostBudget
    from node.tooling.guards.paths import Workspace
    from node.tooling.guards.urls import UrlGuard


@dataclass(slots=True)
class ToolContext:
    """Per-task services and identity for tool calls.

    - ``principal`` / ``capabilities``: the authenticated caller and what it was granted.
    - ``budget``: the task's cost envelope (``None``: unlimited).
    - ``workspace``: confined file access for file tools (``None``: file tools refuse).
    - ``url_guard`` / ``http``: the SSRF guard and the shared outbound client for tools that fetch.
    - ``metadata``: opaque per-call data the tooling engine passes through untouched (the peer
      layer keeps the hop chain and deadline here).
    """

    principal: str = "anonymous"
    capabilities: frozenset[str] = frozenset()
    budget: CostBudget | None = None
    workspace: Workspace | None = None
    url_guard: UrlGuard | None = None
    http: httpx.AsyncClient | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
