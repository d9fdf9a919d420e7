"""NodeRuntime: what a node holds while it runs, opened by its lifespan and closed in reverse.

    async with contextlib.AsyncExitStack() as stack:
        runtime = await NodeRuntime.open(stack, card, public_url, task_store, peer_tools)
        ...

Opening creates the outbound ``httpx.AsyncClient`` (over aiohttp: :mod:`node.outbound_http`),
opens the task store (failing the orphaned tasks a previous process left working), starts peer
discovery and registry heartbeats. ``stack`` closes them in reverse order, and stops the tool
worker pool last.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import httpx

from node.card import NodeCard
from node.outbound_http import outbound_client
from node.peers.directory import PeerDirectory
from node.peers.registration import RegistryLink
from node.peers.settings import read_token
from node.peers.toolset import PeerToolset
from node.store.lifecycle import NodeTaskStore
from node.store.recovery import fail_orphaned
from node.tooling.isolation import close_default_pool

log = logging.getLogger(__name__)
OUTBOUND_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


@dataclass(slots=True)
class NodeRuntime:
    """The live objects of a started node."""

    http: httpx.AsyncClient
    task_store: NodeTaskStore
    peers: PeerDirectory
    registry: RegistryLink | None
    recovered: int = 0  # tasks a previous process left working, failed at start
    ready: bool = False  # /readyz: set once everything is open, cleared first at shutdown

    @classmethod
    async def open(
        cls,
        stack: contextlib.AsyncExitStack,
        card: NodeCard,
        public_url: str,
        task_store: NodeTaskStore,
        peer_tools: PeerToolset,
    ) -> NodeRuntime:
        """Open everything a node needs to serve; ``stack`` closes it all on exit."""
        stack.callback(close_default_pool)  # forkserver workers of process-isolated tools
        http = await stack.enter_async_context(outbound_client(timeout=OUTBOUND_TIMEOUT))
        await task_store.initialize()
        stack.push_async_callback(task_store.close)
        recovered = 0
        if card.server.recover_orphaned:
            recovered = await fail_orphaned(task_store)
        if recovered:
            log.warning("marked %d orphaned task(s) failed: node restarted", recovered)
        peers = PeerDirectory(http, card.peers, self_id=card.id, toolset=peer_tools)
        peers.start()
        stack.push_async_callback(peers.aclose)
        link = registry_link(http, card, public_url, shared=shared_store(task_store))
        if link is not None:
            link.start()
            stack.push_async_callback(link.aclose)
        return cls(
            http=http, task_store=task_store, peers=peers, registry=link, recovered=recovered
        )


def shared_store(task_store: NodeTaskStore) -> bool:
    """Whether replicas may share this store: PostgreSQL names its replica; SQLite, memory don't."""
    return hasattr(task_store, "replica_id")


def registry_link(
    http: httpx.AsyncClient, card: NodeCard, public_url: str, *, shared: bool = False
) -> RegistryLink | None:
    """The heartbeat to the card's registry, or ``None`` when the card names none.

    ``shared``: the task store may be shared by replicas (PostgreSQL names its replica), so the
    registration is theirs too and is left to the registry's TTL at shutdown.
    """
    registry = card.peers.registry
    if registry is None:
        return None
    return RegistryLink(
        http,
        registry.url,
        lambda: read_token(registry.token_env),
        f"{public_url}/.well-known/agent-card.json",
        registry.heartbeat_s,
        deregister=not shared,
    )
