"""An MCP ``CallToolResult`` as a node tool's output: structured content first, then text.

- ``isError`` is a :class:`ToolExecutionError` carrying the server's text (the caller reads it).
- ``structuredContent`` is returned as JSON data when present.
- Otherwise text blocks are joined into one string; a result with other blocks (images, audio,
  resources) becomes ``{"content": [...]}`` in the MCP wire form, bounded later by the tool's
  ``max_output`` like any output.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from node.errors import ToolExecutionError

__all__ = ["render_result"]


def render_result(result: types.CallToolResult) -> Any:
    """The output of a successful call, or :class:`ToolExecutionError` for ``isError``."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if result.is_error:
        raise ToolExecutionError("\n".join(texts)[:2000] or "the MCP tool reported an error")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) == len(result.content):
        return "\n".join(texts)
    return {"content": [b.model_dump(by_alias=True, mode="json") for b in result.content]}
