"""The PostgreSQL stores' pools send one round trip per statement (no reset query on release)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from a2a.types import Task, TaskPushNotificationConfig, TaskState, TaskStatus

from node.store.postgres import PostgresTaskStore
from node.store.push_postgres import PostgresPushConfigStore
from tests.store.conftest import PG_URL, caller, drop_pg_table

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL"),
]


async def logged(pool: asyncpg.Pool) -> list[str]:
    """The statements the pool's only connection sends from now on."""
    sent: list[str] = []
    async with pool.acquire() as conn:
        conn.add_query_logger(lambda record: sent.append(record.query))
    sent.clear()  # what releasing this acquire sent
    return sent


@pytest.fixture
async def store() -> AsyncIterator[PostgresTaskStore]:
    table = f"t_{uuid.uuid4().hex[:16]}"
    opened = PostgresTaskStore(PG_URL, table=table, max_size=1)
    await opened.initialize()
    try:
        yield opened
    finally:
        await opened.close()
        await drop_pg_table(table)


async def test_a_versioned_save_and_reads_are_one_statement_each(store: PostgresTaskStore) -> None:
    assert store._pool is not None
    sent = await logged(store._pool)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    version = await store.cas_save(task, "alice", prev=0, cancel=False, event=b"e1")
    task.status.state = TaskState.TASK_STATE_COMPLETED
    assert await store.cas_save(task, "alice", prev=version, cancel=False, event=b"e2") == 2
    assert await store.read_events("t1", 0) == [(1, b"e1"), (2, b"e2")]
    found = await store.get_versioned("t1", "alice")
    assert found is not None and found[1] == 2
    assert len(sent) == 4, sent
    assert not any("RESET" in q or "UNLISTEN" in q for q in sent)


async def test_a_transaction_left_open_is_still_rolled_back(store: PostgresTaskStore) -> None:
    async with store._conn() as conn:
        await conn.execute("BEGIN")
        await conn.execute(
            f"INSERT INTO {store.table}_events (task_id, seq, owner, data, created_ns)"
            " VALUES ('t9', 1, 'alice', 'x', 0)"
        )
    assert await store.read_events("t9", 0) == []
    async with store._conn() as conn:
        assert not conn.is_in_transaction()


async def test_the_push_config_pool_sends_no_reset_either() -> None:
    table = f"p_{uuid.uuid4().hex[:16]}"
    configs = PostgresPushConfigStore(PG_URL, table=table, max_size=1)
    await configs.initialize()
    try:
        assert configs._pool is not None
        sent = await logged(configs._pool)
        config = TaskPushNotificationConfig(task_id="t1", url="https://example.org/hook")
        await configs.set_info("t1", config, caller("alice"))
        sent.clear()
        assert [c.url for c in await configs.get_info(config.task_id, caller("alice"))] == [
            config.url
        ]
        assert len(sent) == 1, sent
    finally:
        await configs.close()
        await drop_pg_table(table)
