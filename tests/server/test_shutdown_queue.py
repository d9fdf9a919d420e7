"""``ShutdownQueue``: Python 3.13's ``asyncio.Queue.shutdown`` semantics, the SDK's exception.

The cases follow CPython 3.13's ``test_asyncio/test_queues.py`` shutdown tests: puts refused,
gets drained then refused, ``immediate`` empties the queue and releases ``join()``, blocked
getters and putters wake and raise, and the SDK's own ``QueueShutDown`` is what is raised.
"""

from __future__ import annotations

import asyncio

import pytest
from a2a.utils._async_queue_compat import QueueShutDown

from node.server.shutdown_queue import ShutdownQueue, create_async_queue


async def test_put_refused_get_drains_then_refused() -> None:
    q: ShutdownQueue[int] = create_async_queue()
    await q.put(1)
    q.put_nowait(2)
    q.shutdown()
    with pytest.raises(QueueShutDown):
        await q.put(3)
    with pytest.raises(QueueShutDown):
        q.put_nowait(3)
    assert await q.get() == 1 and q.get_nowait() == 2
    with pytest.raises(QueueShutDown):
        await q.get()
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    q.task_done()
    q.task_done()
    await asyncio.wait_for(q.join(), 1)


async def test_immediate_empties_the_queue_and_releases_join() -> None:
    q: ShutdownQueue[int] = ShutdownQueue()
    for i in range(3):
        q.put_nowait(i)
    assert await q.get() == 0
    joined = asyncio.create_task(q.join())
    await asyncio.sleep(0)
    assert not joined.done()
    q.shutdown(immediate=True)
    assert q.empty()
    with pytest.raises(QueueShutDown):
        await q.get()
    q.task_done()  # the one taken before the shutdown
    await asyncio.wait_for(joined, 1)


async def test_blocked_getters_and_putters_wake_and_raise() -> None:
    empty: ShutdownQueue[int] = ShutdownQueue()
    full: ShutdownQueue[int] = ShutdownQueue(maxsize=1)
    full.put_nowait(0)
    getters = [asyncio.create_task(empty.get()) for _ in range(2)]
    putter = asyncio.create_task(full.put(1))
    await asyncio.sleep(0)
    assert not any(t.done() for t in [*getters, putter])
    empty.shutdown()
    full.shutdown()
    for task in [*getters, putter]:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(task, 1)
    assert full.get_nowait() == 0  # what was queued before a non-immediate shutdown stays


async def test_a_cancelled_getter_leaves_no_trace_and_items_flow_in_order() -> None:
    q: ShutdownQueue[int] = ShutdownQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    for i in range(5):
        await q.put(i)
    assert [await q.get() for _ in range(5)] == list(range(5))
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()
