"""a2a-node: turn any machine into a node of an A2A network.

The public surface: load a card, build a node's app, define tools, and talk to nodes. Names are
imported on first use, so ``import node.tooling`` stays light and free of import cycles.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from node.card import NodeCard, load_card, parse_card
    from node.client import NodeClient, artifacts_of, skill_message, text_message
    from node.errors import ErrorKind, NodeError, ToolError
    from node.server.app import build_node_app
    from node.tooling import Tool, Toolbox, ToolContext, tool

_EXPORTS = {
    "ErrorKind": "node.errors",
    "NodeCard": "node.card",
    "NodeClient": "node.client",
    "NodeError": "node.errors",
    "Tool": "node.tooling",
    "ToolContext": "node.tooling",
    "ToolError": "node.errors",
    "Toolbox": "node.tooling",
    "artifacts_of": "node.client",
    "build_node_app": "node.server.app",
    "load_card": "node.card",
    "parse_card": "node.card",
    "skill_message": "node.client",
    "text_message": "node.client",
    "tool": "node.tooling",
}
__all__ = [
    "ErrorKind",
    "NodeCard",
    "NodeClient",
    "NodeError",
    "Tool",
    "ToolContext",
    "ToolError",
    "Toolbox",
    "artifacts_of",
    "build_node_app",
    "load_card",
    "parse_card",
    "skill_message",
    "text_message",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'node' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
