"""What a running tool may know about its call: who asked, what they may do, and shared services.

The context is built once per task by the executor (or by the CLI for local calls) and handed to
every call; the tooling engine itself knows nothing of A2A or HTTP serving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from node.call_log import CallLog
    from node.observability.metrics import NodeMetrics
    from node.tooling.budget import CostBudget
    from node.tooling.guards.paths import Workspace
    from node.tooling.guards.urls import UrlGuard

__all__ = ["ProgressCallback", "ToolContext"]

ProgressCallback = Callable[[str], Awaitable[None]]
"""Receives one human-readable progress line (``"step fetch done (1/3)"``); awaited."""


@dataclass(slots=True)
class ToolContext:
    """Per-task services and identity for tool calls.

    - ``principal`` / ``capabilities``: the authenticated caller and what it was granted.
    - ``budget``: the task's cost envelope (``None``: unlimited).
    - ``workspace``: confined file access for file tools (``None``: file tools refuse).
    - ``url_guard`` / ``http``: the SSRF guard and the shared outbound client for tools that fetch.
    - ``deadline``: epoch seconds by which every call must end (``None``: only tool timeouts).
    - ``progress``: where long-running tools (pipelines) report progress (``None``: nowhere).
    - ``agent_id`` / ``max_hops``: this node's id and hop limit, for tools that forward work
      (``None``: the forwarding tool's own defaults).
    - ``message_metadata``: the metadata of the message being served (its hop chain, if any).
    - ``calls``: where the task's calls are recorded (:mod:`node.call_log`; ``None``: nowhere).
    - ``metrics``: the node's metrics (:mod:`node.observability.metrics`; ``None``: off).
    """

    principal: str = "anonymous"
    capabilities: frozenset[str] = frozenset()
    budget: CostBudget | None = None
    workspace: Workspace | None = None
    url_guard: UrlGuard | None = None
    http: httpx.AsyncClient | None = None
    deadline: float | None = None
    progress: ProgressCallback | None = None
    agent_id: str | None = None
    max_hops: int | None = None
    message_metadata: Mapping[str, Any] = field(default_factory=dict)
    calls: CallLog | None = None
    metrics: NodeMetrics | None = None
