"""``mcp-stdio``: serve a card's skills to an MCP host over stdin/stdout."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

__all__ = ["add_mcp_commands"]


def cmd_mcp_stdio(args: argparse.Namespace) -> int:
    from node.card import load_card
    from node.mcp.stdio import serve_stdio

    card = load_card(args.card)
    data_dir = Path(args.data_dir) if args.data_dir else None
    asyncio.run(serve_stdio(card, data_dir=data_dir, store=args.store))
    return 0


def add_mcp_commands(sub: Any) -> None:
    """Register ``mcp-stdio``."""
    p = sub.add_parser(
        "mcp-stdio",
        help="serve a card's public skills as MCP tools on stdin/stdout (for desktop MCP hosts)",
    )
    p.add_argument("card", help="the node's card file")
    p.add_argument("--data-dir", help="data directory (default: the card's server.data_dir)")
    p.add_argument("--store", help="task store (default: the card's server.store)")
    p.set_defaults(run=cmd_mcp_stdio)
