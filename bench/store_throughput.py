"""Task-store throughput: save+get cycles of a realistic task, in one process.

    .venv/bin/python -m bench.store_throughput [--n 5000] [--concurrency 32] [--pg URL]

Compares the SDK's InMemoryTaskStore, the SDK's DatabaseTaskStore on SQLite (sqlite+aiosqlite)
and our SqliteTaskStore, sequentially and with ``--concurrency`` concurrent workers. Prints ops/s
(one op = one save + one get), ratios, and the worst event-loop stall seen meanwhile. With
``--pg postgresql://…`` it also measures PostgresTaskStore (on a scratch table it drops).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from a2a.helpers import new_task_from_user_message, new_text_artifact, new_text_message
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore
from a2a.types import Role, Task, TaskState

from node.store.sqlite import SqliteTaskStore

CTX = ServerCallContext()
StoreFactory = Callable[[Path], Awaitable[TaskStore]]


def realistic_task() -> Task:
    """A completed task: one user message in history, one text artifact, a status timestamp."""
    msg = new_text_message("please summarise the quarterly report " * 4, role=Role.ROLE_USER)
    task = new_task_from_user_message(msg)
    task.artifacts.append(new_text_artifact("summary", "The quarter went well. " * 20))
    task.status.state = TaskState.TASK_STATE_COMPLETED
    task.status.timestamp.GetCurrentTime()
    return task


async def memory(_: Path) -> TaskStore:
    return InMemoryTaskStore()


async def sdk_sqlite(tmp: Path) -> TaskStore:
    from sqlalchemy.ext.asyncio import create_async_engine

    store = DatabaseTaskStore(create_async_engine(f"sqlite+aiosqlite:///{tmp / 'sdk.db'}"))
    await store.initialize()
    return store


async def node_sqlite(tmp: Path) -> TaskStore:
    store = SqliteTaskStore(tmp / "node.db")
    await store.initialize()
    return store


def postgres(url: str) -> StoreFactory:
    async def factory(_: Path) -> TaskStore:
        from node.store.postgres import PostgresTaskStore

        store = PostgresTaskStore(url, table=f"bench_{uuid.uuid4().hex[:12]}")
        await store.initialize()
        return store

    return factory


async def close(store: TaskStore) -> None:
    if isinstance(store, DatabaseTaskStore):
        await store.engine.dispose()
    elif hasattr(store, "close"):
        if hasattr(store, "dsn"):  # PostgresTaskStore: drop the scratch table first
            import asyncpg

            conn = await asyncpg.connect(store.dsn)
            await conn.execute(f"DROP TABLE {store.table}")
            await conn.close()
        await store.close()


@asynccontextmanager
async def stall_meter() -> AsyncIterator[list[float]]:
    """Yields a one-item list that ends up holding the worst loop lateness in seconds."""
    worst = [0.0]

    async def tick() -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            worst[0] = max(worst[0], time.perf_counter() - start - 0.001)

    ticker = asyncio.create_task(tick())
    try:
        yield worst
    finally:
        ticker.cancel()


async def cycles(store: TaskStore, template: Task, n: int, concurrency: int) -> float:
    """Runs ``n`` save+get cycles with ``concurrency`` workers; returns ops/s.

    Concurrent workers yield to the loop after each cycle (as a server does between requests),
    so the stall meter sees how long a store call keeps the loop busy.
    """
    ids = iter(range(n))

    async def worker() -> None:
        task = Task()
        task.CopyFrom(template)
        for _ in ids:
            task.id = uuid.uuid4().hex
            await store.save(task, CTX)
            got = await store.get(task.id, CTX)
            assert got is not None
            assert got.id == task.id
            if concurrency > 1:
                await asyncio.sleep(0)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return n / (time.perf_counter() - start)


async def main(n: int, concurrency: int, pg: str | None) -> None:
    stores: dict[str, StoreFactory] = {
        "memory (SDK InMemoryTaskStore)": memory,
        "sdk-sqlite (SDK DatabaseTaskStore, aiosqlite)": sdk_sqlite,
        "node-sqlite (SqliteTaskStore)": node_sqlite,
    }
    if pg:
        stores["node-postgres (PostgresTaskStore)"] = postgres(pg)
    template = realistic_task()
    print(f"task: {template.ByteSize()} bytes serialised; n={n}, concurrency={concurrency}")
    results: dict[str, tuple[float, float]] = {}
    for name, factory in stores.items():
        with tempfile.TemporaryDirectory() as tmp:
            store = await factory(Path(tmp))
            try:
                await cycles(store, template, min(n, 200), 1)  # warm-up
                seq = await cycles(store, template, n, 1)
                async with stall_meter() as worst:
                    conc = await cycles(store, template, n, concurrency)
            finally:
                await close(store)
        results[name] = (seq, conc)
        print(
            f"{name:48s} seq {seq:9.0f} ops/s   c={concurrency} {conc:9.0f} ops/s   "
            f"worst loop stall {worst[0] * 1000:6.1f} ms"
        )
    mem, sdk, ours = (results[k] for k in list(stores)[:3])
    for label, i in (("sequential", 0), (f"concurrent({concurrency})", 1)):
        print(
            f"{label:16s} node-sqlite / sdk-sqlite = {ours[i] / sdk[i]:5.1f}x   "
            f"node-sqlite / memory = {ours[i] / mem[i]:4.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--pg", help="also measure PostgresTaskStore on this URL")
    args = parser.parse_args()
    asyncio.run(main(args.n, args.concurrency, args.pg))
