"""The ``a2a-node`` command line: serve nodes and the registry, talk to nodes, inspect cards.

Errors print one line on stderr and exit non-zero; nothing imports this module.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2a.types import TaskState
from google.protobuf.json_format import MessageToDict

from node.errors import NodeError

EXIT_FAILED = 1
EXIT_USAGE = 2


class CliError(NodeError):
    """A user-facing command-line error (one line, non-zero exit)."""


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _parse_args_kv(pairs: Sequence[str]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--arg expects key=value, got {pair!r}")
        arguments[key] = _parse_value(value)
    return arguments


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- serve -----------------------------------------------------------------------------------


def _with_overrides(card: Any, args: argparse.Namespace) -> Any:
    """Apply ``--registry``, ``--registry-token-env`` and the CIDR flags to a loaded card."""
    from node.peers.settings import RegistryConnection

    if args.registry:
        current = card.peers.registry
        registry = (
            current.model_copy(update={"url": args.registry})
            if current
            else RegistryConnection(url=args.registry)
        )
        if args.registry_token_env:
            registry = registry.model_copy(update={"token_env": args.registry_token_env})
        card = card.model_copy(
            update={"peers": card.peers.model_copy(update={"registry": registry})}
        )
    if args.peer_allow_cidr:
        peers = card.peers.model_copy(
            update={"allow_cidrs": [*card.peers.allow_cidrs, *args.peer_allow_cidr]}
        )
        card = card.model_copy(update={"peers": peers})
    if args.allow_cidr:
        cidrs = [*card.network.allow_cidrs, *args.allow_cidr]
        card = card.model_copy(
            update={"network": card.network.model_copy(update={"allow_cidrs": cidrs})}
        )
    return card


def cmd_serve(args: argparse.Namespace) -> int:
    from node.config import load_card
    from node.server.app import build_node_app
    from node.server.serve import serve_app

    card = _with_overrides(load_card(args.card), args)
    host = args.host or card.server.host
    port = card.server.port if args.port is None else args.port
    if not _is_loopback(host) and not card.auth.enabled and not args.insecure:
        raise CliError(
            f"refusing to bind {host} with auth off; configure auth in the card or pass --insecure"
        )
    shown = f"[{host}]" if ":" in host else host
    public_url = args.public_url or card.server.public_url or f"http://{shown}:{port}"
    app = build_node_app(
        card,
        public_url=public_url,
        data_dir=args.data_dir or card.server.data_dir,
        store=args.store,
    )
    asyncio.run(serve_app(app, host, port, log_level=args.log_level))
    return 0


# -- talking to a node -----------------------------------------------------------------------


def _token(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("A2A_NODE_TOKEN") or None


def _print_task(task: Any, out: Any = sys.stdout) -> int:
    from node.client import artifacts_of, status_text

    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
    print(f"task {task.id}: {state}", file=sys.stderr)
    message = status_text(task)
    if message and task.status.state != TaskState.TASK_STATE_COMPLETED:
        print(f"  {message}", file=sys.stderr)
    for name, values in artifacts_of(task).items():
        for value in values:
            text = value if isinstance(value, str) else json.dumps(value, indent=2)
            print(f"--- {name}\n{text}", file=out)
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        for part in task.status.message.parts:
            if part.HasField("data"):
                print(json.dumps(MessageToDict(part.data), indent=2), file=out)
    return 0 if task.status.state == TaskState.TASK_STATE_COMPLETED else EXIT_FAILED


def _build_message(args: argparse.Namespace) -> Any:
    from node.client import data_message, skill_message, text_message

    if args.data is not None:
        try:
            data = json.loads(args.data)
        except json.JSONDecodeError as exc:
            raise CliError(f"--data is not valid JSON: {exc.msg}") from exc
        return data_message(data)
    if args.skill and (args.arg or not args.text):
        return skill_message(args.skill, _parse_args_kv(args.arg))
    if args.text:
        return text_message(args.text, skill=args.skill)
    raise CliError("send needs TEXT, --skill with --arg, or --data")


async def _send(args: argparse.Namespace) -> int:
    """Send, then follow the task: over SSE (default) or by polling (``--poll``)."""
    from a2a.types import Task

    from node.client import NodeClient, apply_event, status_text
    from node.states import INTERRUPTED, TERMINAL

    message = _build_message(args)
    async with NodeClient.connect(
        args.url,
        token=_token(args),
        api_key=args.api_key,
        timeout=args.timeout,
        streaming=not (args.poll or args.no_wait),
    ) as node:
        last = ""

        def show(task: Task) -> None:
            nonlocal last
            text = status_text(task)
            if text and text != last and task.status.state == TaskState.TASK_STATE_WORKING:
                print(f"  … {text}", file=sys.stderr)
                last = text

        task = Task()
        immediately = args.poll or args.no_wait
        async for event in node.events(message, return_immediately=immediately):
            task = apply_event(task, event)
            show(task)
        if args.no_wait:
            print(task.id)
            return 0
        deadline = asyncio.get_running_loop().time() + args.timeout
        while task.id and task.status.state not in TERMINAL | INTERRUPTED:
            if asyncio.get_running_loop().time() > deadline:
                raise CliError(f"task {task.id} still running after {args.timeout:g}s")
            await asyncio.sleep(0.1)
            task = await node.get(task.id)
            show(task)
        return _print_task(task)


async def _get(args: argparse.Namespace) -> int:
    from node.client import NodeClient

    async with NodeClient.connect(args.url, token=_token(args), api_key=args.api_key) as node:
        return _print_task(await node.get(args.task_id))


async def _cancel(args: argparse.Namespace) -> int:
    from node.client import NodeClient

    async with NodeClient.connect(args.url, token=_token(args), api_key=args.api_key) as node:
        _print_task(await node.cancel(args.task_id))
        return 0


# -- cards and local tools -------------------------------------------------------------------


def cmd_card(args: argparse.Namespace) -> int:
    if args.card.startswith(("http://", "https://")):
        import httpx

        url = args.card.rstrip("/")
        if not url.endswith(".json"):
            url += "/.well-known/agent-card.json"
        response = httpx.get(url, timeout=10.0)
        response.raise_for_status()
        print(json.dumps(response.json(), indent=2))
        return 0
    from node.assembly import assemble_tools
    from node.card import build_agent_card
    from node.config import load_card
    from node.server.app import default_public_url

    card = load_card(args.card)
    if args.check:
        print(f"{args.card}: ok ({card.id})")
        return 0
    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    agent_card = build_agent_card(card, tools.skill_specs(), default_public_url(card))
    print(json.dumps(MessageToDict(agent_card), indent=2))
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    from node.assembly import assemble_tools
    from node.config import load_card

    card = load_card(args.card)
    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    for tool in tools.registry.tools():
        flags = [tool.scope, "read-only" if tool.read_only else "writes"]
        if tool.requires:
            flags.append("requires " + ",".join(sorted(tool.requires)))
        print(f"{tool.name}  [{' '.join(flags)}]\n  {tool.description.splitlines()[0]}")
        if args.schemas:
            print("  " + json.dumps(tool.parameters))
    return 0


async def _call(args: argparse.Namespace) -> int:
    import httpx

    from node.assembly import assemble_tools
    from node.config import load_card
    from node.tooling import ToolCall, ToolContext, ToolRunner

    card = load_card(args.card)
    tools = assemble_tools(card, Path(args.data_dir or card.server.data_dir))
    arguments: Any = _parse_args_kv(args.arg)
    if args.json is not None:
        arguments = args.json
    async with httpx.AsyncClient(timeout=30.0) as http:
        ctx = ToolContext(
            principal="cli",
            capabilities=frozenset(args.capability),
            workspace=tools.workspace,
            url_guard=tools.url_guard,
            http=http,
        )
        (result,) = await ToolRunner(tools.registry).run([ToolCall(args.tool, arguments)], ctx)
    if result.ok:
        print(result.text)
        return 0
    print(f"error ({result.error_kind}): {result.error}", file=sys.stderr)
    return EXIT_FAILED


# -- parser ----------------------------------------------------------------------------------


def _client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token", help="bearer token (default: $A2A_NODE_TOKEN)")
    p.add_argument("--api-key", help="API key sent as X-API-Key")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="a2a-node",
        description="Serve A2A nodes and their registry, talk to nodes, inspect cards.",
    )
    parser.add_argument("--log-level", default="warning")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="serve one node from its card")
    p.add_argument("card")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--data-dir")
    p.add_argument("--store", help="memory | sqlite | sqlite:///path.db | postgresql://…")
    p.add_argument("--public-url")
    p.add_argument("--registry", help="registry URL to register with and discover peers from")
    p.add_argument("--registry-token-env", help="environment variable holding the registry token")
    p.add_argument("--allow-cidr", action="append", default=[], help="let URL fetches reach CIDR")
    p.add_argument(
        "--peer-allow-cidr",
        action="append",
        default=[],
        help="let peers found through the registry live in CIDR (the registry's host always may)",
    )
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback bind without auth")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("send", help="send a task to a node and show its progress and artifacts")
    p.add_argument("url")
    p.add_argument("text", nargs="?")
    p.add_argument("--skill")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--data", help="a JSON data part, e.g. '{\"calls\": [...]}'")
    follow = p.add_mutually_exclusive_group()
    follow.add_argument("--no-wait", action="store_true", help="print the task id and return")
    follow.add_argument("--poll", action="store_true", help="poll for progress instead of SSE")
    follow.add_argument("--stream", action="store_true", help="follow over SSE (the default)")
    p.add_argument("--timeout", type=float, default=120.0)
    _client_options(p)
    p.set_defaults(run=lambda a: asyncio.run(_send(a)))

    for name, fn, help_text in (
        ("get", _get, "show a task"),
        ("cancel", _cancel, "cancel a task"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("url")
        p.add_argument("task_id")
        _client_options(p)
        p.set_defaults(run=lambda a, fn=fn: asyncio.run(fn(a)))

    p = sub.add_parser("card", help="print the agent card of a card file or URL")
    p.add_argument("card")
    p.add_argument("--check", action="store_true", help="only validate the card file")
    p.add_argument("--data-dir")
    p.set_defaults(run=cmd_card)

    p = sub.add_parser("tools", help="list a card's tools")
    p.add_argument("card")
    p.add_argument("--schemas", action="store_true")
    p.add_argument("--data-dir")
    p.set_defaults(run=cmd_tools)

    p = sub.add_parser("call", help="run one of a card's tools locally")
    p.add_argument("card")
    p.add_argument("tool")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--json", help="arguments as one JSON object")
    p.add_argument("--capability", action="append", default=[])
    p.add_argument("--data-dir")
    p.set_defaults(run=lambda a: asyncio.run(_call(a)))

    from node.cli.network import add_network_commands

    add_network_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.run(args)
        return code
    except NodeError as exc:
        print(f"a2a-node: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, CliError) else EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the CLI boundary: one clear line, not a traceback
        name = type(exc).__name__
        print(f"a2a-node: {name}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
