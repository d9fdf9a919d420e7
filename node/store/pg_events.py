"""PostgresEventStream: event rows tailed on PostgreSQL ``LISTEN/NOTIFY`` wake-ups.

See :mod:`node.store.event_stream` for the design and why NOTIFY over Redis Streams. This module
holds the one dedicated listening connection of a replica. It listens on the store's event
channel (payload: a task id) and on its cancel channel (payload: ``<replica id> <task id>`` of a
task canceled through a replica; the ids canceled through *other* replicas go to ``on_cancel``).
When the connection is lost it reconnects with backoff (0.1 s doubling to 5 s) and wakes every
subscriber, so that each re-reads from its last ``seq``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from node.store.event_stream import RowEventStream
from node.store.postgres import PostgresTaskStore

log = logging.getLogger(__name__)
_BACKOFF = (0.1, 5.0)


class PostgresEventStream(RowEventStream):
    """Event rows of one task table, woken by NOTIFY on ``channel`` (module docs)."""

    def __init__(
        self, store: PostgresTaskStore, *, on_cancel: Callable[[str], None] | None = None
    ) -> None:
        super().__init__(store.read_events)
        self.store = store
        self.on_cancel = on_cancel
        self._conn: asyncpg.Connection | None = None
        self._lost = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()

    async def start(self) -> None:
        """Connect and listen (raises if the first connection fails), then keep listening."""
        await self._listen()
        self._runner = asyncio.create_task(self._keep_listening(), name="pg-event-listener")

    async def aclose(self) -> None:
        """Stop listening and close the connection."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        await self._drop()

    async def _listen(self) -> None:
        await self.store.initialize()  # names the channels
        conn = await asyncpg.connect(self.store.dsn)
        try:
            await conn.add_listener(self.store.channel, self._on_event)
            await conn.add_listener(self.store.cancel_channel, self._on_cancel)
        except BaseException:
            await conn.close()
            raise
        conn.add_termination_listener(lambda _c: self._lost.set())
        self._conn = conn
        self._lost.clear()
        self.connected.set()
        self.wake_all()  # rows committed while we were not listening

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self.connected.clear()
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def _keep_listening(self) -> None:
        while True:
            await self._lost.wait()
            log.warning("event listener connection lost; reconnecting")
            await self._drop()
            delay = _BACKOFF[0]
            while True:
                try:
                    await self._listen()
                    break
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _BACKOFF[1])
            log.info("event listener reconnected")

    def _on_event(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.wake(payload)

    def _on_cancel(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        replica, _, task_id = payload.partition(" ")
        # A cancel through this replica found the task not running here (or stopped it itself).
        if self.on_cancel is not None and replica != self.store.replica_id:
            self.on_cancel(task_id)
