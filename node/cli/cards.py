"""``card``, ``tools`` and ``call``: a card file (or a node's card URL) and its tools, locally."""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from node.cli.common import EXIT_FAILED, RemoteError, add_arg_option, add_json_option, parse_kv
from node.cli.output import first_sentence, print_json, wrap
from node.errors import ConfigError

__all__ = ["add_card_commands", "check_tool_names"]


def check_tool_names(card: Any, available: Iterable[str]) -> None:
    """``ConfigError`` naming every tool of ``card.tools`` that no package or plugin provides."""
    known = sorted(available)
    problems = []
    for ref in card.tool_refs():
        if ref.name in known:
            continue
        close = difflib.get_close_matches(ref.name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"unknown tool {ref.name!r}{hint}")
    if problems:
        raise ConfigError(
            f"card {card.id!r}: {'; '.join(problems)}. Tools come from the tools package and "
            "plugins; `a2a-node tools CARD` lists a card's tools"
        )


def _fetch_card(url: str) -> Any:
    import httpx

    from node.client import split_card_url

    base, path = split_card_url(url)
    target = base + path
    try:
        response = httpx.get(target, timeout=10.0)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise RemoteError(f"cannot fetch the card at {target}: {exc}") from exc


def cmd_card(args: argparse.Namespace) -> int:
    if args.card.startswith(("http://", "https://")):
        print_json(_fetch_card(args.card))
        return 0
    from node.card import load_card
    from node.tooling.loader import discover_tools

    card = load_card(args.card)
    check_tool_names(card, discover_tools())
    if args.check:
        print(f"{args.card}: ok ({card.id})")
        return 0
    from node.server.agent_card import build_agent_card
    from node.server.app import default_public_url
    from node.server.assembly import assemble_tools

    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    agent_card = build_agent_card(card, tools.skill_specs(), default_public_url(card))
    print_json(MessageToDict(agent_card))
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    from node.card import load_card
    from node.server.assembly import assemble_tools

    card = load_card(args.card)
    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    listed = list(tools.local.tools())
    servers: dict[str, dict[str, Any]] = {}
    if card.mcp_servers:  # connects to each MCP server once to list its tools
        from node.mcp.toolset import list_mcp_tools

        mcp_tools, servers = asyncio.run(list_mcp_tools(tools.mcp))
        listed += mcp_tools
    if args.json:
        print_json(
            [
                {
                    "name": t.name,
                    "description": t.description,
                    "scope": t.scope,
                    "read_only": t.read_only,
                    "requires": sorted(t.requires),
                    "parameters": t.parameters,
                    **({"mcp_server": t.server} if hasattr(t, "server") else {}),
                }
                for t in listed
            ]
        )
        return 0
    for name, state in servers.items():
        if state["state"] != "connected":
            reason = state.get("error", "")
            print(f"MCP server {name}: {state['state']} ({reason})", file=sys.stderr)
    for tool in listed:
        flags = [tool.scope, "read-only" if tool.read_only else "writes"]
        if hasattr(tool, "server"):
            flags.append(f"mcp server {tool.server}")
        if tool.requires:
            flags.append("requires " + ",".join(sorted(tool.requires)))
        print(f"{tool.name}  [{' '.join(flags)}]\n{wrap(first_sentence(tool.description))}")
        if args.schemas:
            print("  " + json.dumps(tool.parameters))
    return 0


async def _call(args: argparse.Namespace) -> int:
    import httpx

    from node.card import load_card
    from node.server.assembly import assemble_tools
    from node.tooling import ToolCall, ToolContext, ToolRunner

    card = load_card(args.card)
    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    arguments: Any = parse_kv(args.arg)
    if args.data is not None:
        arguments = args.data  # a JSON string: the toolbox parses and validates it
    async with httpx.AsyncClient(timeout=30.0) as http:
        ctx = ToolContext(
            principal="cli",
            capabilities=frozenset(args.capability),
            workspace=tools.workspace,
            url_guard=tools.url_guard,
            http=http,
        )
        catalog: Any = tools.local
        if args.tool.startswith("mcp_") and card.mcp_servers:  # connect to the MCP servers
            tools.mcp.start()
            await tools.mcp.wait_settled(max(s.connect_timeout_s for s in card.mcp_servers) + 1)
            catalog = tools.mcp
        try:
            (result,) = await ToolRunner(catalog).run([ToolCall(args.tool, arguments)], ctx)
        finally:
            await tools.mcp.aclose()
    if result.ok:
        print(result.text)
        return 0
    print(f"error ({result.error_kind}): {result.error}", file=sys.stderr)
    return EXIT_FAILED


def add_card_commands(sub: Any) -> None:
    """Register ``card``, ``tools`` and ``call``."""
    p = sub.add_parser("card", help="print the agent card of a card file or a node's URL")
    p.add_argument("card", help="a card file (cards/*.yaml) or a node's base or card URL")
    p.add_argument(
        "--check",
        action="store_true",
        help="only validate the card file, including the names of its tools",
    )
    p.add_argument("--data-dir", help="the node's data directory (default: the card's)")
    p.set_defaults(run=cmd_card)

    p = sub.add_parser("tools", help="list a card's tools with their policy")
    p.add_argument("card", help="a card file (cards/*.yaml)")
    p.add_argument("--schemas", action="store_true", help="print each tool's argument schema")
    p.add_argument("--data-dir", help="the node's data directory (default: the card's)")
    add_json_option(p)
    p.set_defaults(run=cmd_tools)

    p = sub.add_parser("call", help="run one of a card's tools locally, without a server")
    p.add_argument("card", help="a card file (cards/*.yaml)")
    p.add_argument("tool", help="the tool's name (see `a2a-node tools CARD`)")
    add_arg_option(p)
    p.add_argument(
        "--data", "--json", dest="data", metavar="JSON", help="the arguments as one JSON object"
    )
    p.add_argument(
        "--capability",
        action="append",
        default=[],
        help="a capability to hold while the tool runs (repeatable)",
    )
    p.add_argument("--data-dir", help="the node's data directory (default: the card's)")
    p.set_defaults(run=lambda a: asyncio.run(_call(a)))
