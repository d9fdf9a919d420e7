"""Store guards shared by every store: one id limit, final terminal states, message ids, replicas.

Direct store calls (see conftest: memory, SQLite on a file, PostgreSQL on a fresh table).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import asyncpg
import pytest
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor, encode_page_token

from node.errors import ConfigError
from node.store.factory import open_task_store
from node.store.ids import MAX_ID_CHARS
from node.store.recovery import fail_orphaned
from node.store.sends import SendIndex
from node.store.sqlite import SqliteTaskStore
from node.store.terminal import TerminalTaskError
from tests.store.conftest import PG_URL, Backend, caller, drop_pg_table

S = TaskState
ANON = caller("")
TERMINAL = [
    S.TASK_STATE_COMPLETED,
    S.TASK_STATE_FAILED,
    S.TASK_STATE_CANCELED,
    S.TASK_STATE_REJECTED,
]
HUGE = os.urandom(1_400).hex()  # 2,800 random characters: over PostgreSQL's index row limit
BAD_IDS = {
    "too long": "x" * (MAX_ID_CHARS + 1),
    "huge random": HUGE,
    "NUL": "a\x00b",
    "newline": "a\nb",
    "C1 control": "a\x85b",
}


def task(
    task_id: str = "t1",
    *,
    context_id: str = "c1",
    state: TaskState.ValueType = S.TASK_STATE_WORKING,
    message_id: str = "m1",
    text: str = "hello",
) -> Task:
    made = Task(
        id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state),
        history=[Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])],
    )
    made.status.timestamp.FromNanoseconds(1_700_000_000_000_000_000)
    return made


async def listed(store: TaskStore, ctx=ANON, **kw: object) -> list[str]:
    page = await store.list(ListTasksRequest(**kw), ctx)  # type: ignore[arg-type]
    return [t.id for t in page.tasks]


# -- ids ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
async def test_an_invalid_id_is_refused_as_invalid_params_everywhere(
    store: TaskStore, bad: str
) -> None:
    longest = "é" * MAX_ID_CHARS  # the limit itself is fine
    ok = task(longest, context_id=longest, message_id=longest)
    await store.save(ok, ANON)
    assert await store.get(longest, ANON) == ok
    assert await listed(store, context_id=longest) == [longest]
    with pytest.raises(InvalidParamsError, match=r"^id "):
        await store.save(task(bad), ANON)
    with pytest.raises(InvalidParamsError, match=r"^contextId "):
        await store.save(task("t2", context_id=bad), ANON)
    with pytest.raises(InvalidParamsError, match=r"^id "):
        await store.get(bad, ANON)
    with pytest.raises(InvalidParamsError, match=r"^id "):
        await store.delete(bad, ANON)
    with pytest.raises(InvalidParamsError, match=r"^contextId "):
        await store.list(ListTasksRequest(context_id=bad), ANON)
    for token in (
        encode_page_token(bad),
        encode_list_tasks_cursor(ListTasksCursor(timestamp_ns=1, task_id=bad)),
    ):
        with pytest.raises(InvalidParamsError, match="Invalid page token"):
            await store.list(ListTasksRequest(page_token=token), ANON)
    assert await listed(store) == [longest]  # the store is untouched and fully listable


async def test_an_invalid_owner_is_refused_as_invalid_params(store: TaskStore) -> None:
    for owner in ("p\x00", "p" * (MAX_ID_CHARS + 1)):
        with pytest.raises(InvalidParamsError, match=r"^owner"):
            await store.save(task(), caller(owner))
        with pytest.raises(InvalidParamsError, match=r"^owner"):
            await store.list(ListTasksRequest(), caller(owner))
        with pytest.raises(InvalidParamsError, match=r"^owner"):
            await store.get("t1", caller(owner))


# -- terminal states ------------------------------------------------------------------------


@pytest.mark.parametrize("final", TERMINAL, ids=[S.Name(s) for s in TERMINAL])
async def test_a_terminal_task_cannot_change(store: TaskStore, final: int) -> None:
    done = task(state=final)
    await store.save(task(), ANON)
    await store.save(done, ANON)
    for state in (S.TASK_STATE_COMPLETED, S.TASK_STATE_FAILED, S.TASK_STATE_WORKING):
        if state == final:
            continue
        with pytest.raises(TerminalTaskError, match="terminal state"):
            await store.save(task(state=state), ANON)
    rerun = task(state=final)
    rerun.artifacts.add(artifact_id="late", parts=[Part(text="late result")])
    with pytest.raises(TerminalTaskError):
        await store.save(rerun, ANON)
    assert await store.get("t1", ANON) == done
    await store.save(done, ANON)  # an identical save changes nothing and is accepted
    await store.save(task(state=S.TASK_STATE_WORKING), caller("bob"))  # another owner's t1
    await store.save(task(state=S.TASK_STATE_FAILED), caller("bob"))
    await store.delete("t1", ANON)  # deleting stays possible
    assert await store.get("t1", ANON) is None


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_a_second_store_on_the_same_postgres_table_cannot_overwrite() -> None:
    from node.store.postgres import PostgresTaskStore

    table = f"t_{uuid.uuid4().hex[:16]}"
    replica_a = PostgresTaskStore(PG_URL, table=table, max_size=2)
    replica_b = PostgresTaskStore(PG_URL, table=table, max_size=2)
    try:
        await replica_a.save(task(), ANON)
        await replica_b.save(task(state=S.TASK_STATE_CANCELED), ANON)  # a remote cancel
        with pytest.raises(TerminalTaskError):
            await replica_a.save(task(state=S.TASK_STATE_COMPLETED), ANON)  # the runner, late
        stored = await replica_b.get("t1", ANON)
        assert stored is not None and stored.status.state == S.TASK_STATE_CANCELED
    finally:
        await replica_a.close()
        await replica_b.close()
        await drop_pg_table(table)


async def test_a_refused_row_does_not_fail_the_rest_of_its_sqlite_batch(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "tasks.db")
    await store.save(task("done", state=S.TASK_STATE_COMPLETED), ANON)
    gate = threading.Event()
    # Hold the writer thread so that every save below is queued, then committed as one batch.
    held = asyncio.ensure_future(store._write(lambda conn: gate.wait(10)))
    saves = [store.save(task(f"new-{i}", message_id=f"m{i}"), ANON) for i in range(5)] + [
        store.save(task("done", state=S.TASK_STATE_FAILED), ANON),
        store.save(task("twice", state=S.TASK_STATE_COMPLETED), ANON),
        store.save(task("twice", state=S.TASK_STATE_FAILED), ANON),  # same key, same batch
    ]
    pending = asyncio.gather(*saves, return_exceptions=True)
    gate.set()
    await held
    results = await pending
    assert results[:5] == [None] * 5
    assert isinstance(results[5], TerminalTaskError)
    assert results[6] is None
    assert isinstance(results[7], TerminalTaskError)
    assert sorted(await listed(store)) == [
        "done",
        "new-0",
        "new-1",
        "new-2",
        "new-3",
        "new-4",
        "twice",
    ]
    for task_id, state in (("done", S.TASK_STATE_COMPLETED), ("twice", S.TASK_STATE_COMPLETED)):
        stored = await store.get(task_id, ANON)
        assert stored is not None and stored.status.state == state
    await store.close()


# -- message ids (idempotent sends) ---------------------------------------------------------


async def test_the_task_a_message_created_is_found_per_owner_and_window(store: TaskStore) -> None:
    assert isinstance(store, SendIndex)
    before = time.time_ns()
    await store.save(task("t1", message_id="m1"), caller("alice"))
    follow = task("t1", message_id="m1", state=S.TASK_STATE_COMPLETED)
    follow.history.add(message_id="m2", role=Role.ROLE_USER, parts=[Part(text="more")])
    await store.save(follow, caller("alice"))
    found = await store.find_by_message("m1", caller("alice"), since_ns=before)
    assert found == follow
    assert await store.find_by_message("m2", caller("alice"), since_ns=before) is None
    assert await store.find_by_message("m1", caller("bob"), since_ns=before) is None
    assert await store.find_by_message("m1", caller("alice"), since_ns=time.time_ns()) is None
    with pytest.raises(InvalidParamsError, match=r"^messageId"):
        await store.find_by_message("m\x00", caller("alice"), since_ns=before)


async def test_message_ids_survive_reopening(durable: Backend) -> None:
    first = await durable.open()
    await first.save(task("t1", message_id="m1"), ANON)
    await first.close()  # type: ignore[attr-defined]
    durable.opened.remove(first)
    again = await durable.open()
    assert isinstance(again, SendIndex)
    found = await again.find_by_message("m1", ANON, since_ns=0)
    assert found is not None and found.id == "t1"


async def test_an_older_sqlite_file_gets_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE tasks (owner TEXT NOT NULL, id TEXT NOT NULL, context_id TEXT NOT NULL,"
        " state INTEGER NOT NULL, ts_ns INTEGER, data BLOB NOT NULL, PRIMARY KEY (owner, id));"
    )
    old = task("old", state=S.TASK_STATE_COMPLETED)
    conn.execute("INSERT INTO tasks VALUES ('', 'old', 'c1', 3, 1, ?)", (old.SerializeToString(),))
    conn.commit()
    conn.close()
    store = SqliteTaskStore(path)
    assert await store.get("old", ANON) == old
    await store.save(task("new", message_id="m-new"), ANON)
    found = await store.find_by_message("m-new", ANON, since_ns=0)
    assert found is not None and found.id == "new"
    with pytest.raises(TerminalTaskError):
        await store.save(task("old", state=S.TASK_STATE_FAILED), ANON)
    await store.close()


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_an_older_postgres_table_gets_the_new_columns() -> None:
    from node.store.postgres import PostgresTaskStore

    table = f"t_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(
            f'CREATE TABLE {table} (owner TEXT COLLATE "C" NOT NULL, id TEXT COLLATE "C" NOT NULL,'
            " context_id TEXT NOT NULL, state INTEGER NOT NULL, ts_ns BIGINT,"
            " data BYTEA NOT NULL, PRIMARY KEY (owner, id))"
        )
        store = PostgresTaskStore(PG_URL, table=table, max_size=2)
        try:
            await store.save(task("new", message_id="m-new"), ANON)
            found = await store.find_by_message("m-new", ANON, since_ns=0)
            assert found is not None and found.id == "new"
        finally:
            await store.close()
    finally:
        await conn.close()
        await drop_pg_table(table)


def test_a_postgres_url_may_name_its_table(tmp_path: Path) -> None:
    from node.store.postgres import PostgresTaskStore

    store = open_task_store("postgresql://u:p@db:5432/n?table=node_b&sslmode=disable", tmp_path)
    assert isinstance(store, PostgresTaskStore)
    assert (store.table, store.dsn) == ("node_b", "postgresql://u:p@db:5432/n?sslmode=disable")
    plain = open_task_store("postgres://u:p@db/n?sslmode=require", tmp_path)
    assert isinstance(plain, PostgresTaskStore)
    assert (plain.table, plain.dsn) == ("tasks", "postgresql://u:p@db/n?sslmode=require")
    with pytest.raises(ConfigError, match="invalid table name"):
        open_task_store("postgresql://db/n?table=x;drop", tmp_path)


# -- restart recovery with replicas ---------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_postgres_recovery_spares_a_live_replica_and_runs_when_alone() -> None:
    from node.store.postgres import PostgresTaskStore

    table = f"t_{uuid.uuid4().hex[:16]}"

    def replica() -> PostgresTaskStore:
        return PostgresTaskStore(PG_URL, table=table, max_size=2)

    running = replica()
    starting = replica()
    try:
        await running.initialize()
        await running.save(task("busy"), ANON)  # WORKING on a live replica
        await starting.initialize()
        assert await starting.other_replicas() == 1
        assert await fail_orphaned(starting) == 0
        stored = await starting.get("busy", ANON)
        assert stored is not None and stored.status.state == S.TASK_STATE_WORKING
        # The running replica dies; a replica starting now is alone and recovers.
        await running.close()
        await starting.close()
        alone = replica()
        try:
            assert await fail_orphaned(alone) == 1
            stored = await alone.get("busy", ANON)
            assert stored is not None and stored.status.state == S.TASK_STATE_FAILED
            # Recovery keeps the shared lock: another replica starting now leaves tasks alone.
            later = replica()
            try:
                await later.initialize()
                assert await later.other_replicas() == 1
                await later.save(task("fresh"), ANON)
                assert await fail_orphaned(later) == 0
            finally:
                await later.close()
        finally:
            await alone.close()
    finally:
        await running.close()
        await starting.close()
        await drop_pg_table(table)
