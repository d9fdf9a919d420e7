"""Push-config stores: the same behaviour in memory, in the SQLite file and in PostgreSQL.

Each store is opened the way a node opens it, from its task store (``open_push_store``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError

from node.store.lifecycle import NodeTaskStore
from node.store.memory import MemoryTaskStore
from node.store.push_configs import MAX_CONFIGS_PER_TASK, PushConfigStore, open_push_store
from node.store.sqlite import SqliteTaskStore
from tests.store.conftest import ALL, DURABLE, PG_URL, caller

ALICE, BOB = caller("alice"), caller("bob")


def task_store(kind: str, tmp_path: Path, table: str) -> NodeTaskStore:
    if kind == "memory":
        return MemoryTaskStore()
    if kind == "sqlite":
        return SqliteTaskStore(tmp_path / "tasks.db", table=table)
    from node.store.postgres import PostgresTaskStore

    return PostgresTaskStore(PG_URL, table=table)


async def _opened(kind: str, tmp_path: Path) -> AsyncIterator[tuple[str, Path, str]]:
    table = f"t_{uuid.uuid4().hex[:10]}"
    yield kind, tmp_path, table
    if kind == "postgres":
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(f"DROP TABLE IF EXISTS {table}_push_configs")
        finally:
            await conn.close()


@pytest.fixture(params=ALL)
async def opened(request, tmp_path: Path) -> AsyncIterator[tuple[str, Path, str]]:
    async for value in _opened(request.param, tmp_path):
        yield value


@pytest.fixture(params=DURABLE)
async def durable(request, tmp_path: Path) -> AsyncIterator[tuple[str, Path, str]]:
    async for value in _opened(request.param, tmp_path):
        yield value


async def open_configs(kind: str, tmp_path: Path, table: str) -> PushConfigStore:
    store = open_push_store(task_store(kind, tmp_path, table))
    await store.initialize()
    return store


def hook(n: int, **fields: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(url=f"https://hooks.example/{n}", **fields)


async def test_each_owner_sees_only_its_configs_and_delivery_sees_all(opened) -> None:
    store = await open_configs(*opened)
    try:
        stored = await store.set_info("task-1", hook(1, token="a"), ALICE)
        assert (stored.task_id, stored.id) == ("task-1", "task-1")  # default id: the task's
        await store.set_info("task-1", hook(2, id="b"), BOB)  # same task id, another owner
        assert [c.url for c in await store.get_info("task-1", ALICE)] == ["https://hooks.example/1"]
        assert [c.id for c in await store.get_info("task-1", BOB)] == ["b"]
        await store.delete_info("task-1", BOB, "task-1")  # alice's id: nothing of bob's
        dispatch = await store.get_info_for_dispatch("task-1")
        assert sorted(c.url for c in dispatch) == [
            "https://hooks.example/1",
            "https://hooks.example/2",
        ]
        await store.delete_info("task-1", ALICE)  # all of alice's
        assert await store.get_info("task-1", ALICE) == []
        assert [c.id for c in await store.get_info_for_dispatch("task-1")] == ["b"]
    finally:
        await store.close()


async def test_a_config_is_replaced_by_id_and_the_count_is_bounded(opened) -> None:
    store = await open_configs(*opened)
    try:
        for n in range(MAX_CONFIGS_PER_TASK):
            await store.set_info("t", hook(n, id=f"c{n}"), ALICE)
        await store.set_info("t", hook(99, id="c0", token="new"), ALICE)  # a replacement
        configs = await store.get_info("t", ALICE)
        assert len(configs) == MAX_CONFIGS_PER_TASK
        assert [c.token for c in configs if c.id == "c0"] == ["new"]
        with pytest.raises(InvalidParamsError, match="already has"):
            await store.set_info("t", hook(100, id="one-more"), ALICE)
        await store.set_info("t", hook(100, id="one-more"), BOB)  # bob's own budget
        with pytest.raises(InvalidParamsError, match="control character"):
            await store.set_info("u", hook(1, id="nul\x00"), ALICE)
        with pytest.raises(InvalidParamsError, match="at most 256"):
            await store.set_info("x" * 300, hook(1), ALICE)
    finally:
        await store.close()


async def test_durable_configs_survive_reopening(durable) -> None:
    store = await open_configs(*durable)
    await store.set_info("t", hook(1, id="kept", token="tok"), ALICE)
    await store.close()
    store = await open_configs(*durable)
    try:
        assert [(c.id, c.token) for c in await store.get_info("t", ALICE)] == [("kept", "tok")]
    finally:
        await store.close()
