"""SQLite push configs: a delivery lookup for a task without a config reads nothing.

The store is its table's only writer (module doc of :mod:`node.store.push_sqlite`): it reads the
task ids with a config once, adds each id it writes a config for, and answers ``[]`` for the
others without a query. What it answers must stay what the table holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskPushNotificationConfig

from node.store.push_sqlite import SqlitePushConfigStore
from tests.store.conftest import caller

ALICE = caller("alice")


def counted(store: SqlitePushConfigStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    read = store._read

    def spy(sql: str, args: Any) -> list[Any]:
        sent.append(sql)
        return read(sql, args)

    monkeypatch.setattr(store, "_read", spy)
    return sent


async def test_lookups_of_tasks_without_configs_read_nothing_and_answers_stay_true(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tasks.db"
    store = SqlitePushConfigStore(path)
    sent = counted(store, monkeypatch)
    assert await store.get_info_for_dispatch("t1") == []
    assert len(sent) == 1  # the ids with a config, read once
    for task_id in ("t1", "t2", "t3"):
        assert await store.get_info_for_dispatch(task_id) == []
    assert len(sent) == 1

    hook = TaskPushNotificationConfig(url="https://hooks.example/1")
    await store.set_info("t2", hook, ALICE)
    (found,) = await store.get_info_for_dispatch("t2")
    assert found.url == hook.url and found.task_id == "t2"
    assert await store.get_info_for_dispatch("t1") == []
    await store.close()

    again = SqlitePushConfigStore(path)  # a restart: the ids are read from the table
    sent = counted(again, monkeypatch)
    assert [c.url for c in await again.get_info_for_dispatch("t2")] == [hook.url]
    assert await again.get_info_for_dispatch("t1") == []
    assert len(sent) == 2  # the ids, then t2's configs
    await again.delete_info("t2", ALICE)
    assert await again.get_info_for_dispatch("t2") == []
    await again.close()
