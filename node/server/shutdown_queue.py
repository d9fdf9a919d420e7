"""Python 3.13's ``asyncio.Queue.shutdown`` on Python 3.11 and 3.12, for the a2a-sdk's event queues.

The a2a-sdk needs a queue that can be shut down (``a2a.utils._async_queue_compat``): on Python
3.13 it uses ``asyncio.Queue``; before, a ``culsans`` queue, which is thread-safe and costs for it
on every task (several of them per task, each creating locks and conditions, and taking them on
every ``put``/``get``: ~15 % of a SendMessage's CPU in the SDK path's profile). The SDK uses
these queues from one event loop only, as on 3.13.

:class:`ShutdownQueue` is ``asyncio.Queue`` with the lines Python 3.13 added for ``shutdown``
(``Lib/asyncio/queues.py``, 3.11.7 → 3.13.0, nothing else changed), raising the exception the
SDK catches on this Python (its ``QueueShutDown``). ``node.server.sdk_tuning`` gives it to the
SDK; ``tests/server/test_shutdown_queue.py`` checks it against 3.13's behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypeVar

from a2a.utils._async_queue_compat import QueueShutDown

__all__ = ["QueueShutDown", "ShutdownQueue", "create_async_queue"]

T = TypeVar("T")


class ShutdownQueue(asyncio.Queue[T]):
    """``asyncio.Queue`` with ``shutdown(immediate=False)`` as in Python 3.13."""

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._is_shutdown = False

    async def put(self, item: T) -> None:
        """Put ``item``, waiting while the queue is full; ``QueueShutDown`` once shut down."""
        while self.full():
            if self._is_shutdown:
                raise QueueShutDown
            putter = self._get_loop().create_future()  # type: ignore[attr-defined]
            self._putters.append(putter)  # type: ignore[attr-defined]
            try:
                await putter
            except BaseException:  # as asyncio's own Queue ("except:")
                putter.cancel()  # Just in case putter is not done yet.
                # Clean self._putters from canceled putters; it may be gone already (a
                # previous get_nowait call or a shutdown call).
                with contextlib.suppress(ValueError):
                    self._putters.remove(putter)  # type: ignore[attr-defined]
                if not self.full() and not putter.cancelled():
                    # We were woken up by get_nowait(), but can't take
                    # the call.  Wake up the next in line.
                    self._wakeup_next(self._putters)  # type: ignore[attr-defined]
                raise
        return self.put_nowait(item)

    def put_nowait(self, item: T) -> None:
        """Put ``item`` now (``QueueFull``); ``QueueShutDown`` once shut down."""
        if self._is_shutdown:
            raise QueueShutDown
        super().put_nowait(item)

    async def get(self) -> T:
        """The next item, waiting while empty; ``QueueShutDown`` once shut down and empty."""
        while self.empty():
            if self._is_shutdown and self.empty():
                raise QueueShutDown
            getter = self._get_loop().create_future()  # type: ignore[attr-defined]
            self._getters.append(getter)  # type: ignore[attr-defined]
            try:
                await getter
            except BaseException:  # as asyncio's own Queue ("except:")
                getter.cancel()  # Just in case getter is not done yet.
                # Clean self._getters from canceled getters; it may be gone already (a
                # previous put_nowait call, or a shutdown call).
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)  # type: ignore[attr-defined]
                if not self.empty() and not getter.cancelled():
                    # We were woken up by put_nowait(), but can't take
                    # the call.  Wake up the next in line.
                    self._wakeup_next(self._getters)  # type: ignore[attr-defined]
                raise
        return self.get_nowait()

    def get_nowait(self) -> T:
        """The next item now (``QueueEmpty``); ``QueueShutDown`` once shut down and empty."""
        if self.empty():
            if self._is_shutdown:
                raise QueueShutDown
            raise asyncio.QueueEmpty
        return super().get_nowait()

    def shutdown(self, immediate: bool = False) -> None:
        """Shut the queue down: puts raise ``QueueShutDown``, gets once it is empty.

        With ``immediate`` the queue is emptied first (each item marked done, which may release
        ``join()``). Every blocked ``put()`` and ``get()`` wakes up to re-check.
        """
        self._is_shutdown = True
        if immediate:
            while not self.empty():
                self._get()  # type: ignore[attr-defined]
                if self._unfinished_tasks > 0:  # type: ignore[attr-defined]
                    self._unfinished_tasks -= 1  # type: ignore[attr-defined]
            if self._unfinished_tasks == 0:  # type: ignore[attr-defined]
                self._finished.set()  # type: ignore[attr-defined]
        # All getters need to re-check queue-empty to raise ShutDown
        while self._getters:  # type: ignore[attr-defined]
            getter = self._getters.popleft()  # type: ignore[attr-defined]
            if not getter.done():
                getter.set_result(None)
        while self._putters:  # type: ignore[attr-defined]
            putter = self._putters.popleft()  # type: ignore[attr-defined]
            if not putter.done():
                putter.set_result(None)


def create_async_queue(maxsize: int = 0) -> ShutdownQueue[Any]:
    """The SDK's ``create_async_queue``, with a :class:`ShutdownQueue`."""
    return ShutdownQueue(maxsize=maxsize)
