"""PushDispatcher: the node's push sender, delivering from the background so no task waits.

The SDK calls its push sender inline in each task's event consumer and awaits it once per event
(Task, status, artifact): with the SDK's own sender a webhook that takes 0.5 s adds 2 s to a
four-event task, one that hangs adds four timeouts (``bench/push.py``). Here
:meth:`PushDispatcher.send_notification` only copies the event into a bounded queue and returns;
everything else happens in background asyncio tasks owned by the dispatcher:

- per task, one *resolver* reads the task's configs (one store read for all the events queued
  meanwhile) and hands each event to one *lane* per webhook;
- per webhook of a task, one lane posts its events in order
  (:func:`~node.server.push_delivery.deliver`), each retried with bounded exponential backoff
  and jitter (tenacity) up to ``max_attempts``; a lane waits for its event before the next, so a
  receiver sees a task's events in order, and a slow webhook delays only itself;
- at most ``concurrency`` deliveries are in flight (one httpx client of the dispatcher's own, with
  as many connections, so push never takes the connections of peer calls);
- at most ``max_pending`` events wait (queued or being retried); beyond that new events are
  dropped and counted, with a warning.

:meth:`aclose` (node shutdown, after the running tasks have ended) stops taking events, waits up
to ``shutdown_grace_s`` for the pending ones, then cancels the rest and logs how many events of
which tasks were not delivered. Pending deliveries live in memory only: a crash loses them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.server.tasks import PushNotificationConfigStore, PushNotificationSender
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict
from tenacity import (
    AsyncRetrying,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from node.card import PushSettings
from node.server.push_delivery import Outcome, deliver
from node.tooling.guards.urls import UrlGuard

log = logging.getLogger(__name__)
LaneKey = tuple[str, str, str]  # task id, config id, url


@dataclass(slots=True)
class PushStats:
    """What the dispatcher did since it started (events × webhooks, except ``dropped``)."""

    delivered: int = 0
    failed: int = 0  # given up: attempts spent, refused by the guard or by the receiver
    refused: int = 0  # of ``failed``: refused by the guard or by the receiver (never retried)
    retried: int = 0  # attempts that failed for a reason worth retrying (down, timeout, 5xx)
    dropped: int = 0  # events not queued: the queue was full or the node was stopping


@dataclass(slots=True)
class _Lane:
    config: TaskPushNotificationConfig
    bodies: deque[dict[str, Any]] = field(default_factory=deque)


class PushDispatcher(PushNotificationSender):
    """Delivers task events to their webhooks in the background; see the module docstring."""

    def __init__(
        self, configs: PushNotificationConfigStore, guard: UrlGuard, settings: PushSettings
    ) -> None:
        self._configs = configs
        self._guard = guard
        self._settings = settings
        self._client: httpx.AsyncClient | None = None
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._events: dict[str, deque[PushNotificationEvent]] = {}
        self._lanes: dict[LaneKey, _Lane] = {}
        self._workers: set[asyncio.Task[None]] = set()
        self._pending = 0
        self._closed = False
        self.stats = PushStats()

    @property
    def pending(self) -> int:
        """Events × webhooks not yet delivered or given up (plus events not yet resolved)."""
        return self._pending

    async def open(self) -> None:
        """Create the dispatcher's HTTP client (the node's lifespan calls this)."""
        limits = httpx.Limits(max_connections=self._settings.concurrency)
        self._client = httpx.AsyncClient(
            timeout=self._settings.timeout_s, limits=limits, follow_redirects=False
        )
        self._closed = False

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue ``event`` for ``task_id``'s webhooks and return at once (SDK sender hook)."""
        self.submit(task_id, event)

    def submit(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue a copy of ``event``; never waits."""
        if self._closed or self._client is None or self._pending >= self._settings.max_pending:
            self.stats.dropped += 1
            if self.stats.dropped == 1 or self.stats.dropped % 1000 == 0:
                log.warning(
                    "push: dropped %d event(s) so far (%s)",
                    self.stats.dropped,
                    "stopping" if self._closed else f"{self._pending} pending",
                )
            return
        copy = type(event)()
        copy.CopyFrom(event)
        self._pending += 1
        queue = self._events.get(task_id)
        if queue is None:
            queue = self._events[task_id] = deque()
            self._spawn(self._resolve(task_id, queue))
        queue.append(copy)

    def _spawn(self, coro: Any) -> None:
        worker = asyncio.get_running_loop().create_task(coro)
        self._workers.add(worker)
        worker.add_done_callback(self._workers.discard)

    async def _resolve(self, task_id: str, queue: deque[PushNotificationEvent]) -> None:
        """Hand the task's queued events to one lane per webhook, in order."""
        try:
            while queue:
                events = list(queue)
                queue.clear()
                try:
                    configs = await self._configs.get_info_for_dispatch(task_id)
                except Exception:
                    log.exception("push: cannot read the configs of task %s", task_id)
                    configs = []
                if configs:
                    self._route(task_id, configs, events)
                self._pending -= len(events)
        finally:
            if self._events.get(task_id) is queue:
                del self._events[task_id]

    def _route(
        self,
        task_id: str,
        configs: Iterable[TaskPushNotificationConfig],
        events: list[PushNotificationEvent],
    ) -> None:
        bodies = [MessageToDict(to_stream_response(event)) for event in events]
        for config in configs:
            key = (task_id, config.id, config.url)
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = _Lane(config)
                self._spawn(self._drain(key, lane))
            lane.config = config
            lane.bodies.extend(bodies)
            self._pending += len(bodies)

    async def _drain(self, key: LaneKey, lane: _Lane) -> None:
        """Post the lane's events one after another (retried), then end."""
        try:
            while lane.bodies:
                try:
                    outcome = await self._deliver_with_retries(lane.config, lane.bodies[0])
                except Exception:
                    log.exception("push: delivery to config %r failed", lane.config.id)
                    outcome = Outcome.GIVE_UP
                lane.bodies.popleft()
                self._pending -= 1
                if outcome is Outcome.DELIVERED:
                    self.stats.delivered += 1
                else:
                    self.stats.failed += 1
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _deliver_with_retries(
        self, config: TaskPushNotificationConfig, body: dict[str, Any]
    ) -> Outcome:
        settings = self._settings
        retrying = AsyncRetrying(
            stop=stop_after_attempt(settings.max_attempts),
            wait=wait_exponential(multiplier=settings.backoff_s, max=settings.max_backoff_s)
            + wait_random(0, settings.backoff_s),
            retry=retry_if_result(lambda outcome: outcome is Outcome.RETRY),
            retry_error_callback=lambda state: Outcome.GIVE_UP,
        )
        outcome: Outcome = await retrying(self._attempt, config, body)
        if outcome is Outcome.GIVE_UP:
            log.warning(
                "push: gave up an event of task %s for config %r", config.task_id, config.id
            )
        return outcome

    async def _attempt(self, config: TaskPushNotificationConfig, body: dict[str, Any]) -> Outcome:
        assert self._client is not None
        async with self._slots:
            outcome = await deliver(
                self._client, self._guard, config, body, timeout=self._settings.timeout_s
            )
        if outcome is Outcome.RETRY:
            self.stats.retried += 1
        elif outcome is Outcome.GIVE_UP:
            self.stats.refused += 1
        return outcome

    async def aclose(self) -> None:
        """Stop taking events, wait ``shutdown_grace_s`` for the pending ones, then cancel."""
        self._closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.shutdown_grace_s
        while self._workers and loop.time() < deadline:  # resolvers may start lanes meanwhile
            await asyncio.wait(set(self._workers), timeout=deadline - loop.time())
        tasks = sorted({key[0] for key in self._lanes} | set(self._events))
        late = set(self._workers)
        for worker in late:
            worker.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        if self._pending:
            shown = ", ".join(tasks[:10]) + (" …" if len(tasks) > 10 else "")
            log.warning(
                "push: %d event delivery(ies) of %d task(s) not delivered at shutdown: %s",
                self._pending,
                len(tasks),
                shown,
            )
        self._events.clear()
        self._lanes.clear()
        self._pending = 0
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
