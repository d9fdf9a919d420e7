"""An MCP server the project ships: unit conversions over stdio (``cards/units.yaml`` uses it).

    python tools/mcp_servers/units.py          # speaks MCP on stdin/stdout

Built with the ``mcp`` package's ``MCPServer``; not a node tool module (it lives outside the
``tools`` package on purpose: a node reaches it only as an MCP server).
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

Length = Literal["mm", "cm", "m", "km", "in", "ft", "mi"]
_METRES: dict[str, float] = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "mi": 1609.344,
}

server = MCPServer("units", version="1.0.0", log_level="WARNING")


@server.tool(annotations={"readOnlyHint": True})
def convert_length(value: float, unit: Length, to: Length) -> float:
    """Convert a length between mm, cm, m, km, in, ft and mi."""
    return round(value * _METRES[unit] / _METRES[to], 9)


@server.tool(annotations={"readOnlyHint": True})
def convert_temperature(
    value: float, unit: Literal["C", "F", "K"], to: Literal["C", "F", "K"]
) -> float:
    """Convert a temperature between Celsius (C), Fahrenheit (F) and Kelvin (K)."""
    celsius = {"C": value, "F": (value - 32) * 5 / 9, "K": value - 273.15}[unit]
    if celsius < -273.15:
        raise ToolError("below absolute zero")
    return round({"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[to], 9)


if __name__ == "__main__":
    server.run("stdio")
