"""Heartbeats batched in memory and written to the store once per period, in one statement.

A heartbeat is answered once the agent's row is found (this replica's reads already see the new
``last_seen``, :meth:`HeartbeatBatch.queued`) and its time queued here; :meth:`HeartbeatBatch.flush`
writes every queued time with one ``UPDATE`` (:meth:`AgentStore.beat`), so 2,000 agents beating
every 10 s cost one write transaction per second instead of 200. A failed flush keeps the times for
the next one; closing flushes.

The ``UPDATE`` is given the row revision :class:`KnownAgents` holds for each queued id and
returns only the ids whose row it did not find, found rewritten or no longer served (usually
none: no rows come back to decode on the event loop); those are dropped from the replica's
:class:`KnownAgents`, so their next heartbeat reads the database and is answered 404 if the
agent was deleted through another replica.

A queued heartbeat reaches the database at most ``flush_s`` (plus the flush itself) late, which is
why a PostgreSQL sweep waits that much longer than ``evict_after`` before judging a row
(:meth:`Registry.sweep`): another replica may hold a heartbeat the database has not seen yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from node.errors import RegistryError
from node.registry.known import Known, KnownAgents
from node.registry.store import AgentStore

log = logging.getLogger(__name__)


class HeartbeatBatch:
    """Queued heartbeats (agent id → newest time), flushed every ``flush_s`` seconds."""

    def __init__(self, store: AgentStore, flush_s: float, known: KnownAgents) -> None:
        self._store = store
        self._known = known
        self.flush_s = flush_s
        self._queued: dict[str, float] = {}
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, agent_id: str, at: float) -> None:
        if at > self._queued.get(agent_id, float("-inf")):
            self._queued[agent_id] = at

    def queued(self, agent_id: str) -> float:
        """The time queued for ``agent_id`` (``-inf`` when none)."""
        return self._queued.get(agent_id, float("-inf"))

    def hit(self, agent_id: str, now: float, evict_cutoff: float) -> Known | None:
        """A heartbeat at ``now`` for an agent :class:`KnownAgents` remembers and that is not
        evicted (by its newest time, remembered or queued): queued, remembered, and its entry
        returned. ``None`` (nothing done): :meth:`Registry.heartbeat` decides (it reads the row).
        The same steps as that method's hit, without making a record (the hot path)."""
        entry = self._known.entry(agent_id)
        if entry is None:
            return None
        queued = self._queued.get(agent_id, float("-inf"))
        if max(entry.last_seen, queued) < evict_cutoff:
            return None
        if now > queued:
            self._queued[agent_id] = now
        entry.last_seen = now
        return entry

    def discard(self, agent_id: str) -> None:
        self._queued.pop(agent_id, None)

    async def flush(self) -> None:
        """Write everything queued (one statement); on failure it stays queued and this raises."""
        async with self._flushing:
            batch, self._queued = self._queued, {}
            try:
                stale = await self._store.beat(batch, self._known.revs(batch))
            except BaseException:
                for agent_id, at in batch.items():
                    self.add(agent_id, at)
                raise
            self._known.drop(stale)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="registry-heartbeats")

    async def aclose(self) -> None:
        """Stop the periodic flush and write what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush()
        except RegistryError as exc:
            log.error("lost %d heartbeats at shutdown: %s", len(self._queued), exc)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            try:
                await self.flush()
            except RegistryError as exc:
                log.warning("heartbeat flush failed (%d queued, retried): %s", len(self), exc)
