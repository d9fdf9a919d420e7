"""The tool engine: the Tool contract, function tools, registry, runner and loader."""

from __future__ import annotations

from node.tooling.context import ToolContext
from node.tooling.function_tool import FunctionTool, tool
from node.tooling.tool import Tool

__all__ = ["FunctionTool", "Tool", "ToolContext", "tool"]
