"""The tool engine: the Tool contract, function tools, registry, runner and loader."""

from __future__ import annotations

from node.tooling.budget import CostBudget
from node.tooling.context import ToolContext
from node.tooling.declared import CommandTool, HttpTool, declared_tool
from node.tooling.function_tool import FunctionTool, tool
from node.tooling.isolation import Isolation, WorkerPool, run_in_process
from node.tooling.loader import (
    build_registry,
    discover_tools,
    load_builtin_tools,
    load_plugin_tools,
)
from node.tooling.registry import (
    FilteredRegistry,
    PreparedCall,
    ToolCatalog,
    ToolDefinition,
    ToolRegistry,
)
from node.tooling.results import ToolCall, ToolEvent, ToolResult
from node.tooling.runner import OutputSink, ToolRunner
from node.tooling.schema import ArgumentSchema, compile_schema
from node.tooling.tool import Tool, ToolPolicy

__all__ = [
    "ArgumentSchema",
    "CommandTool",
    "CostBudget",
    "FilteredRegistry",
    "FunctionTool",
    "HttpTool",
    "Isolation",
    "OutputSink",
    "PreparedCall",
    "Tool",
    "ToolCall",
    "ToolCatalog",
    "ToolContext",
    "ToolDefinition",
    "ToolEvent",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "ToolRunner",
    "WorkerPool",
    "build_registry",
    "compile_schema",
    "declared_tool",
    "discover_tools",
    "load_builtin_tools",
    "load_plugin_tools",
    "run_in_process",
    "tool",
]
