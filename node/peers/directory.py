"""The peer directory: static peers and registry search results, as tools in a PeerToolset.

Each refresh fetches every static peer's card (ETag-revalidated) and the registry's healthy
agents, merges them by agent id (a static entry wins: it carries the token, filters and
``expose``), drops this node itself, and swaps a new set of tools into its
:class:`PeerToolset`: one :class:`RemoteSkillTool` per kept skill, in group ``peer:<id>``; a peer
whose card changed has its tools rebuilt, a vanished peer's tools are dropped. When the registry
or a peer cannot be reached, the last good view of it stays (a warning is logged; the peer is
marked unhealthy). The registry is read with ETags (:class:`RegistryReader`): when nothing
changed, nothing is parsed and the tools are not touched. A caller that needs a peer tool the
toolset lacks (a pipeline step naming a peer that registered after the last poll) gets one
refresh at once through the toolset's ``reload`` (:meth:`PeerDirectory.refresh_for_miss`:
concurrent misses share it, and a new one starts at most once per ``miss_refresh_s``, so unknown
names cannot poll the registry faster than that). Each peer keeps one
:class:`PeerClient`; its breaker survives card changes.
Peer clients share the node's HTTP client and the directory's gRPC channels (closed by
:meth:`PeerDirectory.aclose`); both discovery paths read 1.0 and 0.3 cards alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Literal

import httpx
from a2a.types import AgentCard, AgentSkill

from node.errors import ConfigError, NodeError, PeerError
from node.peers.breaker import CircuitBreaker
from node.peers.cards import CardFetcher, agent_id, card_from_json, card_url, skill_schemas
from node.peers.grpc_channels import GrpcChannels
from node.peers.peer_client import PeerClient
from node.peers.peer_guard import PeerGuard
from node.peers.registry_client import RegistryReader
from node.peers.remote_tool import RemoteSkillTool
from node.peers.settings import PeersSettings, RegistryConnection, StaticPeer, read_token
from node.peers.toolset import PeerToolset
from node.tooling.guards.urls import UrlGuard
from node.tooling.schema import compile_schema
from node.tooling.tool import Tool

__all__ = ["MISS_REFRESH_S", "PeerDirectory", "PeerInfo"]

log = logging.getLogger(__name__)
MISS_REFRESH_S = 1.0
"""At most one refresh per this many seconds is started for callers missing a tool."""


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """One peer as the directory currently sees it."""

    id: str
    name: str
    url: str  # its card URL
    skills: tuple[str, ...]  # the skill ids offered as tools
    healthy: bool
    source: Literal["static", "registry"]


@dataclass(slots=True)
class _Peer:
    card: AgentCard
    url: str
    healthy: bool
    static: StaticPeer | None = None


@dataclass(slots=True)
class _Installed:
    fingerprint: tuple[bytes, StaticPeer | None]
    tools: list[Tool]


def _wanted(skill: AgentSkill, static: StaticPeer | None) -> bool:
    if static is None:
        return True
    if static.skills is not None and skill.id not in static.skills:
        return False
    return static.tags is None or bool(set(static.tags) & set(skill.tags))


class PeerDirectory:
    """Keeps ``toolset`` in line with the peers this node can see."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        settings: PeersSettings,
        *,
        self_id: str,
        toolset: PeerToolset,
        peer_guard: PeerGuard | None = None,
        clock: Callable[[], float] = time.monotonic,
        miss_refresh_s: float = MISS_REFRESH_S,
    ) -> None:
        """``peer_guard`` checks registry peers' addresses (default: ``settings.allow_cidrs``).

        Installs :meth:`refresh_for_miss` as ``toolset.reload``.
        """
        self._http, self.self_id, self.toolset = http, self_id, toolset
        self.settings = settings
        registry = settings.registry
        self.refresh_s = settings.refresh_s or (registry.refresh_s if registry else 15.0)
        self._breaker = partial(
            CircuitBreaker, settings.breaker_failures, settings.breaker_cooldown_s, clock
        )
        self._peer_guard = peer_guard or PeerGuard(settings.allow_cidrs)
        self._fetcher = CardFetcher(http)
        self._channels = GrpcChannels()
        self._static_cards: dict[str, AgentCard] = {}  # last good card per static URL
        self._registry_peers: dict[str, _Peer] = {}  # last good registry view
        self._reader = RegistryReader(http, registry.url) if registry else None
        self._view: dict[str, _Peer] = {}
        self._installed: dict[str, _Installed] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.refreshes = 0  # completed refreshes
        self.skipped_entries = 0  # registry entries left out by the last registry read
        self.registry_unchanged = 0  # registry reads answered 304 Not Modified (nothing parsed)
        self._reported: set[str] = set()
        self._clock, self._miss_refresh_s = clock, miss_refresh_s
        self._miss: asyncio.Task[None] | None = None  # the refresh callers missing a tool share
        self._miss_started = -float("inf")
        self.miss_refreshes = 0  # refreshes started by callers missing a tool
        toolset.reload = self.refresh_for_miss

    def peers(self) -> list[PeerInfo]:
        """The current view, sorted by peer id."""
        out = []
        for pid, peer in sorted(self._view.items()):
            skills = tuple(s.id for s in peer.card.skills if _wanted(s, peer.static))
            source: Literal["static", "registry"] = "static" if peer.static else "registry"
            out.append(PeerInfo(pid, peer.card.name, peer.url, skills, peer.healthy, source))
        return out

    def breaker_states(self) -> dict[str, str]:
        """Each known peer's circuit breaker state (``closed``, ``open``, ``half_open``)."""
        return {pid: breaker.state for pid, breaker in self._breakers.items()}

    async def refresh(self) -> None:
        """Fetch cards and the registry's list, then replace the tool set; never raises."""
        async with self._lock:
            statics = await asyncio.gather(*(self._fetch_static(p) for p in self.settings.static))
            if self.settings.registry is not None:
                await self._fetch_registry(self.settings.registry)
            view = dict(self._registry_peers)
            view.update((agent_id(p.card), p) for p in statics if p is not None)
            view.pop(self.self_id, None)
            if view != self._view:  # same peers, same cards: the tools stay as they are
                self._sync(view)
            self._view = view
            self.refreshes += 1

    async def refresh_for_miss(self) -> None:
        """Refresh now for a caller that found no tool by the name it needs; never raises.

        Callers arriving while such a refresh runs share it. Another starts only
        ``miss_refresh_s`` after the last one started; until then a miss returns at once (the
        caller fails as before, and the periodic refresh still comes).
        """
        task = self._miss
        if task is None or task.done():
            now = self._clock()
            if now - self._miss_started < self._miss_refresh_s:
                return
            self._miss_started = now
            self.miss_refreshes += 1
            task = self._miss = asyncio.create_task(self._logged_refresh(), name="peer-miss")
        await asyncio.shield(task)  # a caller that goes away leaves it to the others

    async def _logged_refresh(self) -> None:
        try:
            await self.refresh()
        except Exception:  # a bug must not fail the caller's lookup; it is logged with its trace
            log.exception("peer directory refresh failed")

    def start(self) -> None:
        """Refresh now (unless done already) and every ``refresh_s`` in a background task."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._loop(), name="peer-directory")

    async def aclose(self) -> None:
        """Stop refreshing, drop every peer tool and close the gRPC channels."""
        self.toolset.reload = None
        for task in (self._task, self._miss):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._installed = {}
        self.toolset.replace(())
        self._view = {}
        await self._channels.aclose()

    async def _loop(self) -> None:
        if self.refreshes:
            await asyncio.sleep(self.refresh_s)
        while True:
            await self._logged_refresh()  # a bug must not end discovery
            await asyncio.sleep(self.refresh_s)

    async def _fetch_static(self, peer: StaticPeer) -> _Peer | None:
        try:
            card = self._static_cards[peer.url] = await self._fetcher.fetch(peer.url)
            healthy = True
        except NodeError as exc:
            if peer.url not in self._static_cards:
                log.warning("peer %s is unreachable and was never seen: %s", peer.url, exc)
                return None
            log.warning("peer %s is unreachable; keeping its last card: %s", peer.url, exc)
            card, healthy = self._static_cards[peer.url], False
        return _Peer(card, card_url(peer.url), healthy, peer)

    async def _fetch_registry(self, registry: RegistryConnection) -> None:
        problems: list[str] = []
        assert self._reader is not None
        try:
            listing = await self._reader.read(
                token=read_token(registry.token_env), skipped=problems
            )
        except NodeError as exc:
            log.warning("registry %s unavailable; keeping the last view: %s", registry.url, exc)
            self._reader.forget()  # the next read is a full one, so health comes back with it
            self._registry_peers = {
                pid: replace(peer, healthy=False) for pid, peer in self._registry_peers.items()
            }
            return
        if not listing.changed:  # 304 for every page: the last view stands, nothing parsed
            self.registry_unchanged += 1
            return
        entries = listing.agents
        peers: dict[str, _Peer] = {}
        guard = await self._peer_guard.for_registry(registry.url) if self._peer_guard else None
        for entry in entries:
            try:
                found = await self._registry_peer(entry, guard)
            except Exception as exc:  # data from elsewhere: one bad entry costs only itself
                problems.append(
                    f"registry entry {str(entry.get('id'))[:100]!r} has an unusable card: "
                    f"{type(exc).__name__}: {str(exc)[:300]}"
                )
                continue
            if isinstance(found, str):
                problems.append(f"registry peer {str(entry.get('id'))[:100]!r} left out: {found}")
                continue
            peers[found[0]] = found[1]
        self._registry_peers = peers
        self._report(problems)

    @staticmethod
    async def _registry_peer(
        entry: dict[str, Any], guard: UrlGuard | None
    ) -> tuple[str, _Peer] | str:
        """The peer a registry entry describes, or why the address guard refuses it. Raises
        for a card this node cannot use (checked here, so installing its tools cannot fail)."""
        card = card_from_json(entry.get("card"))
        pid = agent_id(card)
        skill_schemas(card)  # what installing reads: it must not fail later, for every peer
        url = entry.get("card_url") or ""
        if not isinstance(url, str):
            raise PeerError("card_url is not a string")
        refused = await PeerGuard.refusal(guard, card, url) if guard else None
        if refused:
            return refused
        return pid, _Peer(card, url, entry.get("healthy", True) is True)

    def _report(self, problems: list[str]) -> None:
        """Log each registry entry problem once (while it lasts), not on every refresh."""
        current = set(problems)
        for problem in problems:
            if problem not in self._reported:
                log.warning("%s", problem)
        self._reported = current
        self.skipped_entries = len(problems)

    def _sync(self, view: dict[str, _Peer]) -> None:
        """Rebuild the tools of new and changed peers, then swap in the whole new set."""
        installed: dict[str, _Installed] = {}
        for pid in set(self._breakers) - set(view):
            del self._breakers[pid]
        for pid, peer in view.items():
            fingerprint = (peer.card.SerializeToString(deterministic=True), peer.static)
            known = self._installed.get(pid)
            if known is not None and known.fingerprint == fingerprint:
                installed[pid] = known
            else:
                installed[pid] = _Installed(fingerprint, self._build(pid, peer))
        tools: dict[str, Tool] = {}
        for pid, entry in sorted(installed.items()):
            for tool in entry.tools:
                if tool.name in tools:
                    log.warning("peer %s skill tool %s not added: name taken", pid, tool.name)
                    continue
                tools[tool.name] = tool
        self.toolset.replace(tools.values())
        self._installed = installed

    def _build(self, pid: str, peer: _Peer) -> list[Tool]:
        static = peer.static
        env = static.token_env if static else None
        s = self.settings
        try:
            client = PeerClient(
                pid,
                peer.card,
                http=self._http,
                grpc_channels=self._channels,
                token=partial(read_token, env),
                breaker=self._breakers.setdefault(pid, self._breaker()),
                retries=s.retries,
                streaming=s.streaming,
            )
        except ConfigError as exc:
            log.warning("peer %s cannot be called: %s", pid, exc)
            return []
        tools: list[Tool] = []
        for skill in peer.card.skills:
            if not _wanted(skill, static):
                continue
            tool = RemoteSkillTool(
                client,
                skill,
                self_id=self.self_id,
                max_hops=s.max_hops,
                call_timeout_s=s.call_timeout_s,
                scope="public" if static and static.expose else "internal",
            )
            try:
                tool.check()
                compile_schema(tool.parameters)  # what the toolset compiles: fail here, alone
            except ConfigError as exc:
                log.warning("peer %s skill %s not added: %s", pid, skill.id, exc)
                continue
            tools.append(tool)
        log.info("peer %s: %d tool(s) %s", pid, len(tools), [t.name for t in tools])
        return tools
