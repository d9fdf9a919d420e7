"""``serve``: one node from its card, with uvicorn, until Ctrl-C.

Once the node listens it prints one line with its URLs. When its start-up fails (a task store
that cannot open: a missing PostgreSQL database, a data directory another node holds) the error
is re-raised here so ``main`` prints it in one line; the traceback uvicorn would log is dropped
(``--log-level debug`` shows it).
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Callable
from typing import Any, Literal, cast

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from node.cli.cards import check_tool_names
from node.cli.common import EXIT_USAGE, CliError, is_loopback
from node.urls import http_url

__all__ = ["add_log_format_option", "add_serve_command"]

_STARTUP_FAILED = "Application startup failed. Exiting."


class _StartupError:
    """An ASGI wrapper that keeps the exception failing the app's start-up (its lifespan)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.error: BaseException | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        failed = False

        async def send_without_traceback(message: Message) -> None:
            nonlocal failed
            if message["type"] == "lifespan.startup.failed":
                failed = True
                message = {**message, "message": ""}  # the CLI reports the error itself
            await send(message)

        try:
            await self.app(scope, receive, send_without_traceback)
        except BaseException as exc:
            if failed:
                self.error = exc
            raise


class _DropStartupFailed(logging.Filter):
    """Drops uvicorn's "Application startup failed" line when the CLI reports the reason."""

    def __init__(self, guard: _StartupError) -> None:
        super().__init__()
        self._guard = guard

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self._guard.error is not None and record.getMessage() == _STARTUP_FAILED)


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


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints one line once it listens."""

    def __init__(self, config: uvicorn.Config, banner: Callable[[], str]) -> None:
        super().__init__(config)
        self._banner = banner

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            print(self._banner(), flush=True)  # after the lifespan: the gRPC port is bound


def event_loop(args: argparse.Namespace) -> Literal["asyncio", "uvloop"]:
    """``--loop``, else ``$A2A_NODE_LOOP``, else asyncio."""
    loop = args.loop or os.environ.get("A2A_NODE_LOOP") or "asyncio"
    if loop not in ("asyncio", "uvloop"):
        raise CliError(f"A2A_NODE_LOOP={loop!r}: expected asyncio or uvloop")
    return cast(Literal["asyncio", "uvloop"], loop)


def cmd_serve(args: argparse.Namespace) -> int:
    from node.card import load_card
    from node.tooling.loader import discover_tools

    card = _with_overrides(load_card(args.card), args)
    host = args.host or card.server.host
    port = card.server.port if args.port is None else args.port
    grpc_port = card.server.grpc_port if args.grpc_port is None else args.grpc_port
    if grpc_port is not None and not 0 <= grpc_port <= 65535:
        raise CliError(f"--grpc-port {grpc_port}: not a port (0 picks a free one)")
    server = card.server.model_copy(update={"host": host, "grpc_port": grpc_port})
    card = card.model_copy(update={"server": server})  # gRPC binds the same host
    if not is_loopback(host) and not card.auth.enabled and not args.insecure:
        raise CliError(
            f"refusing to bind {host} with auth off; configure auth in the card or pass --insecure"
        )
    check_tool_names(card, discover_tools())  # the names, with a did-you-mean, before anything
    from node.observability import logs, tracing

    log_format = args.log_format or card.server.log_format
    logs.configure(args.log_level, log_format, logs.secret_values(card))
    tracing.configure(service_name=card.id)  # before the app: the SDK keeps its spans
    from node.server.app import build_node_app
    from node.server.grpc_binding import grpc_address
    from node.server.serve import make_server

    listening = http_url(host, port)
    public_url = (args.public_url or card.server.public_url or listening).rstrip("/")
    app = build_node_app(
        card,
        public_url=public_url,
        data_dir=args.data_dir or card.server.data_dir,
        store=args.store,
    )
    guard = _StartupError(app)
    config = make_server(guard, host, port, log_level=args.log_level, loop=event_loop(args)).config
    logs.configure(args.log_level, log_format)  # uvicorn's loggers (set up just now) too
    logging.getLogger("uvicorn.error").addFilter(_DropStartupFailed(guard))
    where = public_url if public_url == listening else f"{public_url} (listening on {listening})"
    state = app.state.node

    def banner() -> str:
        grpc = f"; gRPC: {grpc_address(public_url, state.grpc.port)}" if state.grpc else ""
        return (
            f"a2a-node: serving {card.id} ({card.name}) at {where}; "
            f"card: {public_url}/.well-known/agent-card.json{grpc}"
        )

    try:
        _AnnouncingServer(config, banner).run()
    except SystemExit:  # uvicorn exits when the start-up fails or the port is taken
        failed = True
    else:
        failed = False
    if failed:
        if guard.error is not None:
            raise guard.error
        print(f"a2a-node: {card.id} could not start (see above)", file=sys.stderr)
        return EXIT_USAGE
    return 0


def add_serve_command(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="serve one node from its card",
        description="Serve one node from its card until Ctrl-C. Prints one line with its URLs "
        "once it listens.",
    )
    p.add_argument("card", help="the card file (cards/*.yaml)")
    p.add_argument("--host", help="address to bind (default: the card's server.host)")
    p.add_argument("--port", type=int, help="port to bind (default: the card's server.port)")
    p.add_argument(
        "--grpc-port",
        type=int,
        help="also serve A2A over gRPC on this port, 0 for a free one (default: the card's "
        "server.grpc_port; unset: no gRPC)",
    )
    p.add_argument("--data-dir", help="where the task store and workspace live (default: card's)")
    p.add_argument(
        "--store", help="task store: memory | sqlite | sqlite:///path.db | postgresql://…"
    )
    p.add_argument(
        "--public-url",
        help="the URL the agent card advertises (default: http://HOST:PORT); set it behind a "
        "proxy or when clients reach the node by another name",
    )
    p.add_argument("--registry", help="registry URL to register with and discover peers from")
    p.add_argument(
        "--registry-token-env",
        metavar="NAME",
        help="environment variable holding the registry's write token",
    )
    p.add_argument(
        "--allow-cidr",
        action="append",
        default=[],
        help="let this node's URL fetches reach CIDR (private addresses are refused otherwise)",
    )
    p.add_argument(
        "--peer-allow-cidr",
        action="append",
        default=[],
        help="let peers found through the registry live in CIDR (the registry's host always may)",
    )
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback bind without auth")
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        help="event loop (default: $A2A_NODE_LOOP, else asyncio: it serves connections in "
        "arrival order; uvloop's latency tail at saturation is 4-15x asyncio's here, "
        "for the same CPU per task)",
    )
    add_log_format_option(p)
    p.set_defaults(run=cmd_serve)


def add_log_format_option(p: Any) -> None:
    """``--log-format text|json`` (``serve``; ``up`` hands it to its nodes)."""
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        help="log lines as text or one JSON object per line, with task, context, trace id and "
        "principal (default: the card's server.log_format, else text)",
    )
