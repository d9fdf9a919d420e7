"""SqliteTaskStore specifics: file settings, exclusive use, extreme timestamps, failures."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus

from node.errors import ConfigError, StoreError
from node.store.sqlite import SqliteTaskStore
from node.store.sqlite_writer import SqliteWriter
from tests.store.conftest import caller

ANON = caller("")


async def test_creates_directory_and_uses_wal(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "deep" / "dir" / "tasks.db", synchronous="FULL")
    await store.save(Task(id="t", context_id="c"), ANON)  # opens lazily
    conn = store._reader
    assert conn is not None
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    await store.close()
    await store.close()  # idempotent
    assert await store.get("t", ANON) == Task(id="t", context_id="c")  # reopens
    await store.close()


async def test_second_store_on_the_same_file_is_refused(tmp_path: Path) -> None:
    first = SqliteTaskStore(tmp_path / "tasks.db")
    await first.initialize()
    second = SqliteTaskStore(tmp_path / "tasks.db", lock_timeout=0.05)
    with pytest.raises(StoreError, match="another process"):
        await second.initialize()
    await first.close()
    await second.initialize()
    await second.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"synchronous": "OFF"}, {"table": "tasks; DROP TABLE x"}, {"table": "1abc"}],
)
def test_bad_settings(tmp_path: Path, kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        SqliteTaskStore(tmp_path / "tasks.db", **kwargs)  # type: ignore[arg-type]


async def test_timestamps_beyond_int64_nanoseconds(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    far, early = Task(id="far", context_id="c"), Task(id="early", context_id="c")
    far.status.timestamp.FromSeconds(253_402_300_799)  # 9999-12-31
    early.status.timestamp.FromSeconds(-62_135_596_800)  # 0001-01-01
    now = Task(id="now", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    now.status.timestamp.GetCurrentTime()
    for task in (far, early, now):
        await store.save(task, ANON)
    assert await store.get("far", ANON) == far
    page = await store.list(ListTasksRequest(page_size=1), ANON)
    rest = await store.list(ListTasksRequest(page_token=page.next_page_token), ANON)
    assert [t.id for t in (*page.tasks, *rest.tasks)] == ["far", "now", "early"]
    await store.close()


async def test_unreadable_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteTaskStore(tmp_path / "file" / "tasks.db").initialize()


async def test_corrupt_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "tasks.db").write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(StoreError) as info:
        await SqliteTaskStore(tmp_path / "tasks.db").initialize()
    assert isinstance(info.value.__cause__, sqlite3.Error)


async def test_sql_failures_become_store_errors(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db", table="jobs")
    await store.save(Task(id="t", context_id="c"), ANON)
    with sqlite3.connect(tmp_path / "tasks.db") as raw:
        raw.execute("DROP TABLE jobs")
    for call in (
        store.save(Task(id="u", context_id="c"), ANON),
        store.get("t", ANON),
        store.delete("t", ANON),
        store.list(ListTasksRequest(), ANON),
        store.fail_orphaned(),
    ):
        with pytest.raises(StoreError, match="no such table: jobs"):
            await call
    await store.close()


async def test_close_waits_for_pending_saves(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.initialize()
    saves = [
        asyncio.ensure_future(store.save(Task(id=f"t{i}", context_id="c"), ANON)) for i in range(50)
    ]
    await asyncio.sleep(0)  # every save is queued
    await store.close()
    await asyncio.gather(*saves)
    reopened = SqliteTaskStore(tmp_path / "tasks.db")
    assert (await reopened.list(ListTasksRequest(), ANON)).total_size == 50
    await reopened.close()


async def test_saves_queued_together_commit_in_order(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.initialize()
    versions = [
        Task(id="same", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING)),
        Task(id="other", context_id="c"),
        Task(id="same", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)),
    ]
    await asyncio.gather(*(store.save(v, ANON) for v in versions), store.delete("other", ANON))
    assert await store.get("same", ANON) == versions[2]
    assert await store.get("other", ANON) is None
    await store.close()


async def test_the_saves_of_one_loop_turn_reach_the_writer_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests a busy loop runs in one turn commit together, however long the turn: the thread
    is not woken per save (it committed 1.1 saves per batch under load when it was)."""
    batches: list[int] = []
    run = SqliteWriter._run

    def counted(self: SqliteWriter, batch: list[object]) -> None:
        batches.append(len(batch))
        run(self, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(SqliteWriter, "_run", counted)
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.initialize()

    async def request(i: int) -> None:
        time.sleep(0.002)  # this request's work, the GIL released: the writer thread could run
        await store.save(Task(id=f"t{i}", context_id="c"), ANON)

    await asyncio.gather(*(request(i) for i in range(10)))
    assert batches == [10]
    assert (await store.list(ListTasksRequest(), ANON)).total_size == 10
    await store.close()
