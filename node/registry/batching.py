"""Group commit: calls that arrive while a batch is being written go together into the next one.

    batcher = Batcher(write_many, max_batch=500)   # write_many(items) -> one result per item
    result = await batcher.submit(item)            # raises the item's exception, if any

One writer task runs while there is work; each batch is one call of ``write_many`` (one
transaction for the registry), so concurrent registrations cost one write together instead of
one each, and nothing queues beyond the callers already waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batcher(Generic[T, R]):
    """Runs ``write_many`` over the items submitted meanwhile, ``max_batch`` at a time."""

    def __init__(
        self,
        write_many: Callable[[list[T]], Awaitable[Sequence[R | Exception]]],
        *,
        max_batch: int = 500,
    ) -> None:
        self._write_many = write_many
        self._max_batch = max_batch
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        """Batches written (tests and benches)."""

    async def submit(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        try:
            while self._queue:
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                self.batches += 1
                try:
                    results = await self._write_many([item for item, _ in batch])
                except Exception as exc:  # the whole write failed: every caller gets it
                    results = [exc] * len(batch)
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():  # the caller went away; its write stands
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._task = None
