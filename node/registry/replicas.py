"""Registry replicas on one database agree by following the change log (a short poll).

Every registration, replacement and deletion appends the agent's id to ``registry_changes`` in
the same transaction (see :mod:`node.registry.store`). Each replica polls, every
``sync_interval_s`` (1 s), for change rows after its cursor written by *other* replicas and
re-reads those agents' rows (present → put in the index, absent → removed), and in the same
read transaction picks up the heartbeats other replicas flushed (rows whose ``last_seen`` moved
in the last few seconds), so health agrees too. Replicas agree within about one interval plus
one heartbeat flush, well inside 2 s. A replica that could not poll for longer than half the
change log's retention reloads everything instead.

Why a poll and not LISTEN/NOTIFY: the heartbeats must be re-read by a timer anyway (a NOTIFY per
heartbeat batch would carry little and still need the re-read), so a poll of the change log in
that same once-a-second read transaction costs nothing extra, whereas NOTIFY adds a dedicated
connection per replica that must be reconnected and re-read after every drop, cannot pass a
transaction-mode PgBouncer, and would only shorten the agreement from ~1 s to milliseconds —
which discovery does not need. The same code also serves several processes on one SQLite file.
One poll is one read transaction; the log's sequence order equals commit order because its
writers hold an advisory lock, so a cursor never skips a late commit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from node.errors import RegistryError
from node.registry.store import CHANGE_RETENTION_S, AgentStore

if TYPE_CHECKING:
    from node.registry.service import Registry

log = logging.getLogger(__name__)


class ReplicaFollower:
    """Keeps one replica's index in step with what the other replicas write."""

    def __init__(self, registry: Registry, store: AgentStore, interval_s: float) -> None:
        self._registry = registry
        self._store = store
        self.interval_s = interval_s
        self._cursor = 0
        self._beats_since = float("-inf")
        self._last_ok = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    @property
    def margin_s(self) -> float:
        """How far back heartbeats are re-read: another replica's flush delay, doubled, plus
        two seconds for the poll itself and for clocks that differ a little."""
        return 2 * self._registry.settings.heartbeat_flush + 2.0

    async def reload(self) -> None:
        """Set the cursor, then (re)load the whole index from the store."""
        self._cursor = await self._store.last_change()
        self._beats_since = self._registry.clock() - self.margin_s
        await self._registry.load()
        self._last_ok = time.monotonic()

    async def step(self) -> None:
        """One poll: apply the other replicas' changes and heartbeats."""
        if time.monotonic() - self._last_ok > CHANGE_RETENTION_S / 2:
            log.warning("registry replica fell behind the change log; reloading the index")
            await self.reload()
            return
        now = self._registry.clock()
        cursor, changed, beats = await self._store.follow(
            self._cursor, self._beats_since, origin=self._registry.origin
        )
        await self._registry.apply(changed, beats)
        self._cursor, self._beats_since = cursor, now - self.margin_s
        self._last_ok = time.monotonic()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="registry-follower")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.step()
            except RegistryError as exc:
                log.warning("following the other registry replicas failed: %s", exc)
