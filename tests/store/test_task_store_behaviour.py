"""The TaskStore contract, run against the SDK's in-memory store and ours (see conftest)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import (
    Artifact,
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import encode_page_token

from node.store.recovery import fail_orphaned
from tests.store.conftest import Backend, caller

S = TaskState
ANON = caller("")


def make_task(
    task_id: str | None = None,
    *,
    context_id: str = "ctx-1",
    state: TaskState.ValueType = S.TASK_STATE_COMPLETED,
    ts_ns: int | None = 1_700_000_000_000_000_000,
) -> Task:
    task = Task(
        id=task_id or uuid.uuid4().hex,
        context_id=context_id,
        status=TaskStatus(state=state),
        history=[Message(message_id="m1", role=Role.ROLE_USER, parts=[Part(text="hello")])],
        artifacts=[Artifact(artifact_id="a1", name="out", parts=[Part(text="result")])],
    )
    if ts_ns is not None:
        task.status.timestamp.FromNanoseconds(ts_ns)
    return task


async def list_ids(store: TaskStore, ctx: ServerCallContext = ANON, **kw: object) -> list[str]:
    page = await store.list(ListTasksRequest(**kw), ctx)  # type: ignore[arg-type]
    return [t.id for t in page.tasks]


async def test_save_get_round_trip(store: TaskStore) -> None:
    task = make_task()
    await store.save(task, ANON)
    assert await store.get(task.id, ANON) == task
    assert await store.get("missing", ANON) is None


async def test_save_replaces_and_get_returns_a_copy(store: TaskStore) -> None:
    task = make_task(state=S.TASK_STATE_WORKING)
    await store.save(task, ANON)
    task.status.state = S.TASK_STATE_COMPLETED
    await store.save(task, ANON)
    got = await store.get(task.id, ANON)
    assert got is not None
    assert got.status.state == S.TASK_STATE_COMPLETED
    got.artifacts.clear()
    assert await store.get(task.id, ANON) == task


async def test_another_owners_task_is_invisible(
    store: TaskStore, alice: ServerCallContext, bob: ServerCallContext
) -> None:
    task = make_task("shared-id")
    await store.save(task, alice)
    assert await store.get("shared-id", bob) is None
    assert await list_ids(store, bob) == []
    await store.delete("shared-id", bob)
    assert await store.get("shared-id", alice) == task

    bobs = make_task("shared-id", context_id="bob-ctx")
    await store.save(bobs, bob)
    assert await store.get("shared-id", alice) == task
    assert await store.get("shared-id", bob) == bobs


async def test_long_ids(store: TaskStore) -> None:
    task = make_task("t" * 100, context_id="c" * 100)
    await store.save(task, ANON)
    assert await store.get("t" * 100, ANON) == task
    assert await list_ids(store, context_id="c" * 100) == ["t" * 100]


async def test_delete(store: TaskStore) -> None:
    task = make_task()
    await store.save(task, ANON)
    await store.delete(task.id, ANON)
    assert await store.get(task.id, ANON) is None
    await store.delete(task.id, ANON)  # absent: no error


async def test_list_filters(store: TaskStore) -> None:
    t0 = 1_700_000_000_000_000_000
    tasks = [
        make_task("a", context_id="c1", state=S.TASK_STATE_WORKING, ts_ns=t0),
        make_task("b", context_id="c1", state=S.TASK_STATE_COMPLETED, ts_ns=t0 + 10),
        make_task("c", context_id="c2", state=S.TASK_STATE_WORKING, ts_ns=t0 + 20),
        make_task("d", context_id="c2", state=S.TASK_STATE_WORKING, ts_ns=None),
    ]
    for task in tasks:
        await store.save(task, ANON)
    assert await list_ids(store, context_id="c1") == ["b", "a"]
    assert await list_ids(store, status=S.TASK_STATE_WORKING) == ["c", "a", "d"]
    after = make_task(ts_ns=t0 + 10).status.timestamp
    assert await list_ids(store, status_timestamp_after=after) == ["c", "b"]
    assert await list_ids(store, context_id="c2", status=S.TASK_STATE_WORKING) == ["c", "d"]
    page = await store.list(ListTasksRequest(context_id="c1"), ANON)
    assert page.total_size == 2
    assert page.page_size == DEFAULT_LIST_TASKS_PAGE_SIZE
    assert not page.next_page_token
    assert list(page.tasks) == [tasks[1], tasks[0]]


def _mixed_tasks(n: int) -> list[Task]:
    """Tasks with equal, distinct and missing timestamps, in random id order."""
    t0 = 1_700_000_000_000_000_000
    return [
        make_task(uuid.uuid4().hex[:8], ts_ns=None if i % 5 == 0 else t0 + (i % 7) * 1000)
        for i in range(n)
    ]


def _expected_order(tasks: list[Task]) -> list[str]:
    def key(t: Task) -> tuple[bool, int, str]:
        has = t.status.HasField("timestamp")
        return has, t.status.timestamp.ToNanoseconds() if has else 0, t.id

    return [t.id for t in sorted(tasks, key=key, reverse=True)]


async def test_list_orders_by_timestamp_then_id_missing_timestamps_last(store: TaskStore) -> None:
    tasks = _mixed_tasks(30)
    for task in tasks:
        await store.save(task, ANON)
    assert await list_ids(store) == _expected_order(tasks)


async def test_ids_compare_by_code_point_like_python(store: TaskStore) -> None:
    ids = ["a-c", "ab", "B", "a_b", "é", "Z", "a b", "ä", "10", "9"]
    tasks = [make_task(i) for i in ids]
    for task in tasks:
        await store.save(task, ANON)
    assert await list_ids(store) == sorted(ids, reverse=True)
    page = await store.list(ListTasksRequest(page_size=3), ANON)
    assert await list_ids(store, page_token=page.next_page_token) == sorted(ids, reverse=True)[3:]


async def test_paging_through_the_whole_set(store: TaskStore) -> None:
    tasks = _mixed_tasks(33)
    for task in tasks:
        await store.save(task, ANON)
    seen: list[str] = []
    token = ""
    while True:
        page = await store.list(ListTasksRequest(page_size=7, page_token=token), ANON)
        assert page.total_size == 33
        assert page.page_size == 7
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
        assert len(page.tasks) == 7
    assert seen == _expected_order(tasks)


async def test_default_page_size(store: TaskStore) -> None:
    for task in _mixed_tasks(DEFAULT_LIST_TASKS_PAGE_SIZE + 3):
        await store.save(task, ANON)
    page = await store.list(ListTasksRequest(), ANON)
    assert len(page.tasks) == DEFAULT_LIST_TASKS_PAGE_SIZE
    assert page.next_page_token
    rest = await store.list(ListTasksRequest(page_token=page.next_page_token), ANON)
    assert len(rest.tasks) == 3


async def test_cursor_survives_deleting_the_last_task_of_the_page(store: TaskStore) -> None:
    tasks = _mixed_tasks(10)
    for task in tasks:
        await store.save(task, ANON)
    order = _expected_order(tasks)
    page = await store.list(ListTasksRequest(page_size=4), ANON)
    await store.delete(order[3], ANON)
    assert await list_ids(store, page_token=page.next_page_token) == order[4:]


async def test_legacy_task_id_token_starts_at_that_task(store: TaskStore) -> None:
    tasks = _mixed_tasks(10)
    for task in tasks:
        await store.save(task, ANON)
    order = _expected_order(tasks)
    assert await list_ids(store, page_token=encode_page_token(order[3])) == order[3:]


@pytest.mark.parametrize("token", ["not-a-token", encode_page_token("no-such-task"), "%%%"])
async def test_bad_page_token(store: TaskStore, token: str) -> None:
    await store.save(make_task(), ANON)
    with pytest.raises(InvalidParamsError):
        await store.list(ListTasksRequest(page_token=token), ANON)


async def test_durable_stores_validate_page_size(durable: Backend) -> None:
    store = await durable.open()
    for size in (101, 1000, -1):
        with pytest.raises(InvalidParamsError):
            await store.list(ListTasksRequest(page_size=size), ANON)
    assert (await store.list(ListTasksRequest(page_size=100), ANON)).page_size == 100


async def test_concurrent_saves_all_land(store: TaskStore) -> None:
    tasks = [make_task(f"task-{i:03d}") for i in range(200)]
    await asyncio.gather(*(store.save(t, ANON) for t in tasks))
    assert (await store.list(ListTasksRequest(page_size=1), ANON)).total_size == 200
    got = await asyncio.gather(*(store.get(t.id, ANON) for t in tasks))
    assert got == tasks


async def test_data_survives_reopening(durable: Backend, alice: ServerCallContext) -> None:
    first = await durable.open()
    task = make_task(state=S.TASK_STATE_INPUT_REQUIRED)
    await first.save(task, alice)
    await first.close()  # type: ignore[attr-defined]
    second = await durable.open()
    assert await second.get(task.id, alice) == task
    assert await list_ids(second, alice) == [task.id]


async def test_fail_orphaned(
    durable: Backend, alice: ServerCallContext, bob: ServerCallContext
) -> None:
    store = await durable.open()
    working = make_task("working", state=S.TASK_STATE_WORKING)
    working.status.message.CopyFrom(
        Message(message_id="p", role=Role.ROLE_AGENT, parts=[Part(text="calling add")])
    )
    submitted = make_task("submitted", state=S.TASK_STATE_SUBMITTED, ts_ns=None)
    waiting = make_task("waiting", state=S.TASK_STATE_INPUT_REQUIRED)
    done = make_task("done", state=S.TASK_STATE_COMPLETED)
    for task in (working, waiting, done):
        await store.save(task, alice)
    await store.save(submitted, bob)
    before = time.time_ns()

    assert await fail_orphaned(store, reason="node restarted") == 2

    for task_id, ctx in (("working", alice), ("submitted", bob)):
        failed = await store.get(task_id, ctx)
        assert failed is not None
        assert failed.status.state == S.TASK_STATE_FAILED
        assert failed.status.message.role == Role.ROLE_AGENT
        assert [p.text for p in failed.status.message.parts] == ["node restarted"]
        assert failed.status.message.task_id == task_id
        assert failed.status.timestamp.ToNanoseconds() >= before // 1000 * 1000
    failed_working = await store.get("working", alice)
    assert failed_working is not None
    assert failed_working.history[-1].parts[0].text == "calling add"
    assert failed_working.artifacts == working.artifacts
    assert await store.get("waiting", alice) == waiting
    assert await store.get("done", alice) == done
    assert await list_ids(store, alice, status=S.TASK_STATE_FAILED) == ["working"]
    assert await list_ids(store, bob, status=S.TASK_STATE_SUBMITTED) == []
    assert await fail_orphaned(store) == 0
