"""PostgreSQL push configs: delivery lookups are cached per task, and a write through any replica
(another store on the same table) reaches every replica's cache by NOTIFY."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
from a2a.types import TaskPushNotificationConfig

from node.store.push_postgres import PostgresPushConfigStore
from tests.store.conftest import PG_URL, caller, drop_pg_table

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]
ALICE = caller("alice")
HOOK = "https://example.org/hook"


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[PostgresPushConfigStore, PostgresPushConfigStore]]:
    table = f"p_{uuid.uuid4().hex[:16]}"
    a, b = (PostgresPushConfigStore(PG_URL, table=table, max_size=1) for _ in range(2))
    await a.initialize()
    await b.initialize()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()
        await drop_pg_table(table)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def lookups(store: PostgresPushConfigStore) -> list[str]:
    """The dispatch queries ``store`` sends to the database from now on."""
    sent: list[str] = []
    assert store._pool is not None
    for holder in store._pool._holders:
        if holder._con is not None:
            holder._con.add_query_logger(
                lambda r: sent.append(r.query) if r.query == store._dispatch else None
            )
    return sent


async def urls(store: PostgresPushConfigStore, task_id: str) -> list[str]:
    return [c.url for c in await store.get_info_for_dispatch(task_id)]


async def test_a_task_without_configs_is_looked_up_once(replicas) -> None:
    a, _ = replicas
    sent = lookups(a)
    for _ in range(3):
        assert await urls(a, "t1") == []
    assert len(sent) == 1


async def test_a_config_set_or_deleted_through_another_replica_reaches_the_cache(replicas) -> None:
    a, b = replicas
    assert await urls(a, "t1") == []  # cached: no configs
    await b.set_info("t1", TaskPushNotificationConfig(task_id="t1", url=HOOK), ALICE)
    await eventually(lambda: has(a, [HOOK]))
    sent = lookups(a)
    assert await urls(a, "t1") == [HOOK]
    assert sent == []  # served from the cache again
    await b.delete_info("t1", ALICE)
    await eventually(lambda: has(a, []))


async def test_a_write_here_is_seen_here_at_once(replicas) -> None:
    a, _ = replicas
    assert await urls(a, "t1") == []
    await a.set_info("t1", TaskPushNotificationConfig(task_id="t1", url=HOOK), ALICE)
    assert await urls(a, "t1") == [HOOK]


async def test_without_its_listener_a_replica_reads_the_database(replicas) -> None:
    a, b = replicas
    assert await urls(a, "t1") == []
    assert a._listener is not None
    pid = a._listener.get_server_pid()
    admin = await asyncpg.connect(PG_URL)
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await eventually(lambda: deaf(a))
    # b's notification reaches nobody on a's side; a must not answer from a stale cache.
    await b.set_info("t1", TaskPushNotificationConfig(task_id="t1", url=HOOK), ALICE)
    assert await urls(a, "t1") == [HOOK]


async def has(store: PostgresPushConfigStore, expected: list[str]) -> bool:
    return await urls(store, "t1") == expected


async def deaf(store: PostgresPushConfigStore) -> bool:
    return store._listener is None
