"""The tool engine: the Tool contract and its policy, function tools, catalogs and the runner.

Everything else (schemas, isolation pools, loaders, declared tools) lives in its submodule.
"""

from __future__ import annotations

from node.tooling.catalog import (
    CombinedCatalog,
    FilteredCatalog,
    PreparedCall,
    Toolbox,
    ToolCatalog,
    ToolDefinition,
)
from node.tooling.context import ProgressCallback, ToolContext
from node.tooling.function_tool import FunctionTool, tool
from node.tooling.isolation import run_in_process
from node.tooling.results import ToolCall, ToolResult
from node.tooling.runner import ToolRunner
from node.tooling.tool import Tool, ToolPolicy

__all__ = [
    "CombinedCatalog",
    "FilteredCatalog",
    "FunctionTool",
    "PreparedCall",
    "ProgressCallback",
    "Tool",
    "ToolCall",
    "ToolCatalog",
    "ToolContext",
    "ToolDefinition",
    "ToolPolicy",
    "ToolResult",
    "ToolRunner",
    "Toolbox",
    "run_in_process",
    "tool",
]
