"""McpTool: one tool of an MCP server as a node tool, called through the server's link."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from node.errors import ToolTimeout
from node.mcp.results import render_result
from node.tooling.tool import Tool, ToolPolicy

if TYPE_CHECKING:
    from node.mcp.link import McpLink
    from node.tooling.context import ToolContext

__all__ = ["McpTool"]


class McpTool(Tool):
    """``mcp_<server>_<tool>``; ``original`` is the name the server knows it by."""

    def __init__(
        self,
        link: McpLink,
        *,
        name: str,
        original: str,
        description: str,
        parameters: dict[str, Any],
        policy: ToolPolicy,
    ) -> None:
        self.link = link
        self.server = link.name
        self.original = original
        self.name = name
        self.description = description
        self.parameters = parameters
        self.policy = policy

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """Call the tool within its timeout and the task's deadline (the runner bounds both)."""
        timeout = self.policy.timeout
        if ctx.deadline is not None:
            timeout = min(timeout, ctx.deadline - time.time())
            if timeout <= 0:
                raise ToolTimeout(f"the task's deadline passed before {self.name} could run")
        result = await self.link.call(self.original, arguments, timeout)
        return render_result(result)
