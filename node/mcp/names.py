"""Tool names for MCP tools: ``mcp_<server>_<tool>``, safe for the node and for LLM APIs.

MCP allows ``[A-Za-z0-9._-]{1,128}`` (and servers send worse); the node's names match
``^[a-zA-Z0-9_-]{1,64}$``. Other characters become ``_``; a name over 64 characters is cut and
ends with a short hash of the original, so two long names stay distinct. The original name is
kept on the tool for the call.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["mcp_tool_name"]

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64


def mcp_tool_name(server: str, tool: str) -> str:
    """The node's name for ``tool`` of MCP server ``server`` (at most 64 characters)."""
    raw = f"mcp_{server}_{tool}"
    name = _UNSAFE.sub("_", raw)
    if len(name) <= _MAX_NAME and name == raw:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    if len(name) <= _MAX_NAME - len(digest) - 1:
        return f"{name}_{digest}"  # "a.b" and "a_b" must not collide
    return f"{name[: _MAX_NAME - len(digest) - 1]}_{digest}"
