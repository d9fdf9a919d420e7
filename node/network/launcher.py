"""Start a local network as child processes, wait until it is up, supervise it, stop it.

    network = Network(load_spec("deploy/local.yaml"), spec_dir=Path("deploy"), run_dir=...)
    views = await network.start()      # registry, site, nodes; healthy AND registered, or raises
    ...                                # meanwhile crashes are reported, restart: true restarts
    await network.stop()               # nodes first (they deregister), then registry and site

Every child runs ``python -m node.cli ...`` (or ``http.server`` for the site) on 127.0.0.1 with
its output in ``<run_dir>/<name>.log``. The registry's write token is made here
(``secrets.token_urlsafe``) and reaches the children only through their environment
(:data:`TOKEN_ENV`); it is never printed. So that a user can add a node to the running network,
it is also written to ``<run_dir>/registry.token``, readable by this user only, while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from node.card import load_card
from node.errors import ConfigError, NodeError
from node.network.children import Child
from node.network.spec import NetworkSpec, NodeSpec
from node.peers.registry_client import search_agents

__all__ = ["HOST", "TOKEN_ENV", "LaunchError", "Network", "NodeView", "mask"]

HOST = "127.0.0.1"
TOKEN_ENV = "A2A_NODE_REGISTRY_TOKEN"
POLL_S = 0.1


class LaunchError(NodeError):
    """The network could not be started (a port taken, a child that died, a deadline passed)."""


def mask(token: str) -> str:
    """Enough of a secret to recognise it, never enough to use it."""
    return token[:4] + "…"


@dataclass(frozen=True, slots=True)
class NodeView:
    """A running node as the registry lists it."""

    name: str
    url: str
    skills: tuple[str, ...]


@dataclass(slots=True)
class Member:
    """A child plus how to tell it is up and whether to bring it back."""

    child: Child
    url: str
    ready_path: str
    restart: bool
    agent_id: str | None = None  # nodes: the id they register under
    grpc_port: int | None = None  # serving A2A over gRPC too
    restarts: int = 0
    gave_up: bool = False
    crashes: list[int] = field(default_factory=list)


def _url(port: int) -> str:
    return f"http://{HOST}:{port}"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Network:
    """The registry, the optional demo site and the nodes of one spec, as child processes."""

    def __init__(
        self,
        spec: NetworkSpec,
        *,
        spec_dir: Path,
        run_dir: Path,
        cli: Sequence[str] = (sys.executable, "-m", "node.cli"),
        log_level: str = "info",
        log_format: str | None = None,
        report: Callable[[str], None] = _stderr,
    ) -> None:
        self.spec = spec
        self.run_dir = run_dir.resolve()
        self.token = secrets.token_urlsafe(32)
        self.report = report
        self.token_file = self.run_dir / "registry.token"
        self.registry_url = _url(spec.registry.port)
        self.site_url = _url(spec.site.port) if spec.site else None
        self._stopping = False
        self._watchers: list[asyncio.Task[None]] = []
        self.log_format = log_format  # the nodes' (serve --log-format); None: their cards'
        env = {**os.environ, TOKEN_ENV: self.token, "PYTHONUNBUFFERED": "1"}
        cli = [*cli, "--log-level", log_level]

        def child(name: str, argv: list[str]) -> Child:
            return Child(name, argv, self.run_dir / f"{name}.log", env=env)

        reg = spec.registry
        db = reg.db if "://" in reg.db else str(self.run_dir / reg.db)
        registry_argv = [*cli, "registry", "--host", HOST, "--port", str(reg.port), "--db", db]
        registry_argv += ["--token-env", TOKEN_ENV, "--ttl", str(reg.ttl_s)]
        for cidr in reg.allow_cidrs:
            registry_argv += ["--allow-cidr", cidr]
        if reg.grpc_port is not None:
            registry_argv += ["--grpc-port", str(reg.grpc_port)]
        self.registry = Member(
            child("registry", registry_argv),
            self.registry_url,
            "/healthz",
            reg.restart,
            grpc_port=reg.grpc_port,
        )
        self.members = [self.registry]
        self.site: Member | None = None
        if spec.site is not None:
            directory = (spec_dir / spec.site.dir).resolve()
            argv = [sys.executable, "-m", "http.server", "--bind", HOST, str(spec.site.port)]
            self.site = Member(
                child("site", [*argv, "--directory", str(directory)]),
                _url(spec.site.port),
                "/",
                True,
            )
            self.members.append(self.site)
        self.nodes = [self._node(n, spec_dir, cli, child) for n in spec.nodes]
        self.members += self.nodes
        names = [m.child.name for m in self.members]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # names pick log files and data directories
            raise ConfigError(f"names used twice: {', '.join(twice)}; give the nodes a 'name'")

    def _node(
        self,
        node: NodeSpec,
        spec_dir: Path,
        cli: list[str],
        child: Callable[[str, list[str]], Child],
    ) -> Member:
        card_path = (spec_dir / node.card).resolve()
        card = load_card(card_path)  # fails early, naming the file, when a card is invalid
        name = node.name or card.id
        argv = [*cli, "serve", str(card_path), "--host", HOST, "--port", str(node.port)]
        argv += ["--data-dir", str(self.run_dir / name)]
        argv += ["--registry", self.registry_url, "--registry-token-env", TOKEN_ENV]
        if self.log_format:
            argv += ["--log-format", self.log_format]
        for cidr in node.allow_cidrs:
            argv += ["--allow-cidr", cidr]
        if node.store:
            argv += ["--store", node.store]
        if node.grpc_port is not None:
            argv += ["--grpc-port", str(node.grpc_port)]
        return Member(
            child(name, argv), _url(node.port), "/readyz", node.restart, card.id, node.grpc_port
        )

    # -- start ------------------------------------------------------------------------------

    async def start(self) -> list[NodeView]:
        """Start every child and wait until all are healthy and every node is registered.

        Raises :class:`LaunchError` (after stopping what it started) when a port is taken, a
        child exits for good, or ``startup_timeout_s`` passes.
        """
        wanted = [(m.url, m.child.name) for m in self.members]
        wanted += [
            (f"{HOST}:{m.grpc_port}", f"{m.child.name} gRPC") for m in self.members if m.grpc_port
        ]
        taken = [(at, what) for at, what in wanted if not _port_free(int(at.rsplit(":", 1)[1]))]
        if taken:
            ports = ", ".join(f"{at} ({what})" for at, what in taken)
            raise LaunchError(f"already in use on this machine: {ports}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_token()
        deadline = time.monotonic() + self.spec.startup_timeout_s
        services = [m for m in self.members if m not in self.nodes]
        try:
            for wave in (services, self.nodes):  # nodes register at once when the registry is up
                for member in wave:
                    await member.child.start()
                    self._watchers.append(asyncio.create_task(self._watch(member)))
                views = await self._wait_up(wave, deadline)
            return views
        except BaseException:
            await self.stop()
            raise

    def _write_token(self) -> None:
        """The registry token in a file only this user may read (for nodes added by hand)."""
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)  # when the file was already there
            out.write(self.token + "\n")

    async def _wait_up(self, members: list[Member], deadline: float) -> list[NodeView]:
        """Wait until ``members`` answer and the nodes among them are listed by the registry."""
        pending = list(members)
        nodes = [m for m in members if m in self.nodes]
        async with httpx.AsyncClient(timeout=2.0) as http:
            while True:
                pending = [m for m in pending if not await self._answers(http, m)]
                listed = await self._listed(http) if not pending and nodes else {}
                views = [self._view(m, listed) for m in nodes]
                if not pending and all(v is not None for v in views):
                    return [v for v in views if v is not None]
                dead = [m for m in self.members if m.gave_up]
                if dead:
                    raise LaunchError("; ".join(self._death(m) for m in dead))
                if time.monotonic() > deadline:
                    late = [m.child.name for m in pending] or [
                        m.child.name for m, v in zip(nodes, views, strict=True) if v is None
                    ]
                    what = "not healthy" if pending else "not registered"
                    raise LaunchError(
                        f"{', '.join(late)} {what} after {self.spec.startup_timeout_s:.0f}s; "
                        f"see the logs in {self.run_dir}"
                    )
                await asyncio.sleep(POLL_S)

    @staticmethod
    async def _answers(http: httpx.AsyncClient, member: Member) -> bool:
        if not member.child.running:
            return False
        try:
            return (await http.get(member.url + member.ready_path)).status_code == 200
        except httpx.HTTPError:
            return False

    async def _listed(self, http: httpx.AsyncClient) -> dict[str, tuple[str, ...]]:
        """Healthy agents in the registry: ``{id: skill ids}`` (empty when it cannot answer)."""
        try:
            entries = await search_agents(http, self.registry_url)
        except NodeError:
            return {}
        return {
            str(e.get("id")): tuple(str(s.get("id")) for s in e.get("skills", [])) for e in entries
        }

    @staticmethod
    def _view(member: Member, listed: dict[str, tuple[str, ...]]) -> NodeView | None:
        if member.agent_id not in listed:
            return None
        return NodeView(member.child.name, member.url, listed[member.agent_id])

    def _death(self, member: Member) -> str:
        code = member.crashes[-1] if member.crashes else member.child.returncode
        tail = member.child.log_tail(8)
        detail = f"\n{tail}" if tail else ""
        return f"{member.child.name} exited with code {code} (log: {member.child.log_path}){detail}"

    # -- supervise --------------------------------------------------------------------------

    async def _watch(self, member: Member) -> None:
        policy = self.spec.restart
        child = member.child
        while True:
            code = await child.wait()
            if self._stopping:
                return
            member.crashes.append(code)
            self.report(f"{child.name} exited with code {code} (log: {child.log_path})")
            if time.monotonic() - child.started_at >= policy.stable_after_s:
                member.restarts = 0
            if not member.restart or member.restarts >= policy.max_restarts:
                member.gave_up = True
                why = "restart is off" if not member.restart else "too many restarts"
                self.report(f"{child.name} stays down ({why})")
                return
            delay = min(policy.backoff_initial_s * 2**member.restarts, policy.backoff_max_s)
            member.restarts += 1
            self.report(
                f"restarting {child.name} in {delay:.1f}s "
                f"(attempt {member.restarts}/{policy.max_restarts})"
            )
            await asyncio.sleep(delay)
            if self._stopping:
                return
            try:
                await child.start()
            except OSError as exc:
                member.gave_up = True
                self.report(f"{child.name} cannot be restarted: {exc}")
                return

    # -- stop -------------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop every child: nodes first (so they deregister), then the registry and the site."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        for watcher in self._watchers:
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        self._watchers.clear()
        timeout = self.spec.stop_timeout_s
        await asyncio.gather(*(m.child.stop(timeout) for m in self.nodes))
        await asyncio.gather(*(m.child.stop(timeout) for m in self.members if m not in self.nodes))
        self.token_file.unlink(missing_ok=True)  # the token dies with the registry

    def kill(self) -> None:
        """SIGKILL every child's process group now (a second Ctrl-C)."""
        for member in self.members:
            member.child.signal(signal.SIGKILL)

    def pids(self) -> list[int]:
        return [m.child.pid for m in self.members if m.child.pid is not None]
