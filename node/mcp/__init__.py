"""MCP both ways: MCP servers as tools of a node, and a node's skills as an MCP server.

Client side (an MCP server is one more toolset of the node's catalog)::

    transport.py     stdio child process or streamable HTTP (httpx2), per connection
    link.py          McpLink: one supervisor task per server owning its mcp.Client
    toolset.py       McpToolset: every server's tools as one catalog, refreshed per connection
    tool.py          McpTool: ``mcp_<server>_<tool>``, called through its link
    names.py         tool names;  schema.py  input schemas;  results.py  call results

Server side (``/mcp`` and ``a2a-node mcp-stdio``)::

    skill_server.py  the node's public skills as MCP tools, each call an A2A task
    endpoint.py      the streamable HTTP endpoint mounted in the node's app
    stdio.py         the same server over stdio, for desktop hosts
"""

from node.mcp.toolset import McpToolset

__all__ = ["McpToolset"]
