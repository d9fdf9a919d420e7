"""The network commands of ``a2a-node``: ``registry``, ``agents`` and ``up``.

``node.cli.build_parser`` calls :func:`add_network_commands`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from node.cli.common import add_json_option, is_loopback
from node.cli.output import format_table, print_json
from node.cli.registry_import import add_import_command
from node.cli.serve import add_log_format_option
from node.errors import ConfigError

__all__ = ["add_network_commands", "list_agents"]

DEFAULT_REGISTRY_PORT = 8090
TOKEN_ENV_DEFAULT = "A2A_NODE_REGISTRY_TOKEN"


# -- registry ---------------------------------------------------------------------------------


def cmd_registry(args: argparse.Namespace) -> int:
    from pydantic import SecretStr, ValidationError

    from node.registry import RegistrySettings
    from node.registry.app import run_registry
    from node.registry.settings import FederationSettings

    token: SecretStr | None = None
    if args.token_env:
        value = os.environ.get(args.token_env, "").strip()
        if not value:
            raise ConfigError(
                f"environment variable {args.token_env} (the registry token) is unset"
            )
        token = SecretStr(value)
    if token is None and not is_loopback(args.host) and not args.insecure:
        raise ConfigError(
            f"refusing to bind {args.host} with open writes; pass --token-env NAME or --insecure"
        )
    try:
        settings = RegistrySettings(
            host=args.host,
            port=args.port,
            grpc_port=args.grpc_port,
            public_url=args.public_url,
            db=args.db,
            token=token,
            ttl_s=args.ttl,
            evict_after_s=args.evict_after,
            sweep_interval_s=args.sweep_interval,
            known_agents=args.known_agents,
            allow_cidrs=tuple(args.allow_cidr),
            metrics=not args.no_metrics,
            federation=FederationSettings(upstreams=_upstreams(args.upstream)),
        )
    except ValidationError as exc:
        raise ConfigError(
            "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        ) from exc
    run_registry(settings)  # on uvloop when installed
    return 0


def _upstreams(values: Sequence[str]) -> tuple[Any, ...]:
    """``--upstream URL[#TOKEN_ENV]`` values as :class:`Upstream` settings (tokens from the env)."""
    from pydantic import SecretStr

    from node.registry.settings import Upstream

    out = []
    for value in values:
        url, _, env = value.partition("#")
        token = None
        if env:
            secret = os.environ.get(env, "").strip()
            if not secret:
                raise ConfigError(f"environment variable {env} (the token for {url}) is unset")
            token = SecretStr(secret)
        out.append(Upstream(url=url, token=token))
    return tuple(out)


# -- agents -----------------------------------------------------------------------------------


def _base_url(card_url: str) -> str:
    return card_url.removesuffix("/.well-known/agent-card.json")


def list_agents(
    registry_url: str,
    *,
    skill: str | None = None,
    tag: str | None = None,
    q: str | None = None,
    healthy_only: bool = True,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """Every agent matching the filters (:func:`node.peers.registry_client.search_agents`)."""
    import httpx

    from node.peers.registry_client import search_agents

    async def search() -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as http:
            return await search_agents(
                http,
                registry_url,
                token=token,
                skill=skill,
                tag=tag,
                q=q,
                healthy_only=healthy_only,
                include_card=False,
                timeout_s=10.0,
            )

    return asyncio.run(search())


def cmd_agents(args: argparse.Namespace) -> int:
    agents = list_agents(
        args.registry_url,
        skill=args.skill,
        tag=args.tag,
        q=args.q,
        healthy_only=not args.all,
        token=args.token or os.environ.get(TOKEN_ENV_DEFAULT) or None,
    )
    if args.json:
        print_json(agents)
        return 0
    if not agents:
        print("no agents match", file=sys.stderr)
        return 0
    rows = [
        [
            str(a.get("id", "")),
            str(a.get("name", "")),
            _base_url(str(a.get("card_url", ""))),
            ", ".join(str(s.get("id")) for s in a.get("skills", [])),
            "yes" if a.get("healthy") else "no",
        ]
        for a in agents
    ]
    print(format_table(["ID", "NAME", "URL", "SKILLS", "HEALTHY"], rows))
    return 0


# -- up ---------------------------------------------------------------------------------------


def _example(network: Any, views: Sequence[Any]) -> str:
    urls = {v.name: v.url for v in views}
    urls |= {"registry": network.registry_url, "site": network.site_url or ""}
    if network.spec.example:
        with contextlib.suppress(KeyError, ValueError, IndexError):
            return str(network.spec.example.format_map(urls))
    first = next((v for v in views if v.skills), None)
    return f"a2a-node send {first.url} --skill {first.skills[0]}" if first else ""


def _join_port(network: Any) -> int:
    """A port next to the network's own, for the node a user adds."""
    used = {int(m.url.rsplit(":", 1)[1]) for m in network.members}
    port = max(used) + 1
    while port in used:
        port += 1
    return port


def join_lines(network: Any) -> list[str]:
    """How to add a node to this network from another shell.

    The registry's write token is generated at start-up and lives only in the children's
    environment and in a file readable by this user alone (``Network.token_file``); the commands
    read it from that file, so the secret itself is printed neither here nor in any log.
    """
    from node.network.launcher import TOKEN_ENV

    return [
        f'export {TOKEN_ENV}="$(cat {shlex.quote(str(network.token_file))})"',
        f"a2a-node serve YOUR_CARD.yaml --port {_join_port(network)} "
        f"--registry {network.registry_url} --registry-token-env {TOKEN_ENV}",
    ]


def _print_up(network: Any, views: Sequence[Any], example: str) -> None:
    print(f"registry  {network.registry_url}  (write token in {network.token_file})")
    if network.site_url:
        print(f"site      {network.site_url}/")
    print()
    rows = [[v.name, v.url, ", ".join(v.skills)] for v in views]
    print(format_table(["NAME", "URL", "SKILLS"], rows))
    print()
    if example:
        print(f"try:   {example}")
    print(f"       a2a-node agents {network.registry_url}")
    first, *rest = join_lines(network)
    print(f"join:  {first}")
    for line in rest:
        print(f"       {line}")
    print(f"logs:  {network.run_dir}/*.log    Ctrl-C stops every process.", flush=True)


async def _demo(example: str, timeout_s: float = 60.0) -> None:
    """Run the example command once the network can serve it (peers are discovered by polling)."""
    argv = shlex.split(example)
    if argv[:1] == ["a2a-node"]:
        argv = [sys.executable, "-m", "node.cli", *argv[1:]]
    print(f"\n$ {example}", flush=True)
    deadline = time.monotonic() + timeout_s
    while True:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            out, _ = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        text = out.decode(errors="replace")
        if "not available" not in text or time.monotonic() > deadline:
            print(text, end="", flush=True)
            return
        await asyncio.sleep(0.5)  # a node has not yet discovered the peer it needs


async def _up(args: argparse.Namespace) -> int:
    from node.network.launcher import Network
    from node.network.spec import load_spec

    spec_path = Path(args.spec)
    spec = load_spec(spec_path)
    if args.timeout is not None:
        spec = spec.model_copy(update={"startup_timeout_s": args.timeout})
    level = getattr(args, "log_level", "warning")
    network = Network(
        spec,
        spec_dir=spec_path.parent,
        run_dir=Path(args.run_dir),
        log_level=level,
        log_format=args.log_format,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():  # a second signal: no more waiting
            network.kill()
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    try:
        print(
            f"starting {len(network.members)} processes (logs in {network.run_dir}) …", flush=True
        )
        starting = asyncio.create_task(network.start())
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()  # start() stops what it started before it ends
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            print("stopped before the network was up", file=sys.stderr)
            return 0
        stopped.cancel()
        views = starting.result()
        example = _example(network, views)
        _print_up(network, views, example)
        if args.demo and example:
            demo, waiter = asyncio.create_task(_demo(example)), asyncio.create_task(stop.wait())
            await asyncio.wait({demo, waiter}, return_when=asyncio.FIRST_COMPLETED)
            demo.cancel()
            waiter.cancel()
        await stop.wait()
        print("stopping …", file=sys.stderr, flush=True)
        await network.stop()
        print("all processes stopped", file=sys.stderr)
        return 0
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


# -- parser -----------------------------------------------------------------------------------


def add_network_commands(subparsers: Any) -> None:
    """Register ``registry``, ``agents`` and ``up`` on an argparse sub-parsers action."""
    p = subparsers.add_parser("registry", help="run the registry service")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_REGISTRY_PORT, help="port (default: %(default)s)"
    )
    p.add_argument(
        "--grpc-port", type=int, help="also serve the A2A endpoint over gRPC (0: a free port)"
    )
    p.add_argument("--db", default="registry.db", help="SQLite file or postgresql+asyncpg://…")
    p.add_argument("--token-env", metavar="NAME", help="environment variable with the write token")
    p.add_argument(
        "--allow-cidr",
        action="append",
        default=[],
        help="let card fetches reach CIDR, e.g. 127.0.0.0/8 for nodes on this machine "
        "(private addresses are refused otherwise)",
    )
    p.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="URL[#TOKEN_ENV]",
        help="an upstream registry that completes searches this one cannot satisfy; after # the "
        "environment variable holding its read token (repeatable)",
    )
    p.add_argument("--ttl", type=float, default=30.0, help="seconds a heartbeat keeps one healthy")
    p.add_argument("--evict-after", type=float, help="seconds before a silent agent is removed")
    p.add_argument("--sweep-interval", type=float, help="seconds between eviction sweeps")
    p.add_argument(
        "--known-agents",
        type=int,
        default=100_000,
        help="agents whose entries are kept for heartbeats (size it for the fleet; ~2.7 kB each)",
    )
    p.add_argument("--public-url", help="base URL published in the registry's own card")
    p.add_argument("--insecure", action="store_true", help="allow a non-loopback bind, open writes")
    p.add_argument("--no-metrics", action="store_true", help="do not serve GET /metrics")
    p.set_defaults(run=cmd_registry)
    add_import_command(p)  # a2a-node registry import FILE

    p = subparsers.add_parser("agents", help="search a registry's agents")
    p.add_argument("registry_url", help="the registry's base URL")
    p.add_argument("--skill", help="only agents with this skill id")
    p.add_argument("--tag", help="only agents with a skill tagged so")
    p.add_argument("--q", help="free text, matched against names, descriptions and skills")
    p.add_argument("--all", action="store_true", help="unhealthy agents too")
    p.add_argument("--token", help=f"read token (default: ${TOKEN_ENV_DEFAULT})")
    add_json_option(p)
    p.set_defaults(run=cmd_agents)

    p = subparsers.add_parser("up", help="start a local network and stay in the foreground")
    p.add_argument(
        "spec", nargs="?", default="deploy/local.yaml", help="network file (default: %(default)s)"
    )
    p.add_argument("--run-dir", default=".a2a-node/run", help="logs, databases, node data")
    p.add_argument("--timeout", type=float, help="seconds to wait for the network to be up")
    p.add_argument("--demo", action="store_true", help="once up, run the example command")
    add_log_format_option(p)  # the nodes' logs
    p.set_defaults(run=lambda a: asyncio.run(_up(a)))
