"""PushDispatcher's bounds, driven directly: the queue never grows past ``max_pending``."""

from __future__ import annotations

from a2a.types import Task, TaskState, TaskStatus

from node.card import PushSettings
from node.server.push_dispatcher import PushDispatcher
from node.store.push_configs import MemoryPushConfigStore
from node.tooling.guards.urls import UrlGuard


def event() -> Task:
    return Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))


async def test_events_past_the_bound_are_dropped_and_counted_never_queued() -> None:
    dispatcher = PushDispatcher(MemoryPushConfigStore(), UrlGuard(), PushSettings(max_pending=2))
    await dispatcher.open()
    try:
        for _ in range(5):  # no await in between: nothing is resolved meanwhile
            await dispatcher.send_notification("t", event())
        assert dispatcher.pending == 2
        assert dispatcher.stats.dropped == 3
    finally:
        await dispatcher.aclose()
    assert dispatcher.pending == 0


async def test_a_closed_dispatcher_takes_no_events() -> None:
    dispatcher = PushDispatcher(MemoryPushConfigStore(), UrlGuard(), PushSettings())
    await dispatcher.open()
    await dispatcher.aclose()
    await dispatcher.send_notification("t", event())
    assert (dispatcher.pending, dispatcher.stats.dropped) == (0, 1)
