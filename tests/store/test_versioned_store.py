"""The SDK's versioned store contract on SQLite and PostgreSQL (node.store.versioned) and the
event streams over its rows (node.store.event_stream, node.store.pg_events)."""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import aclosing

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus, TaskStatusUpdateEvent

from node.store.cluster import Cluster, cluster_for
from node.store.lifecycle import NodeTaskStore
from node.store.terminal import TerminalTaskError
from node.store.versioned import VersionedStore
from tests.store.conftest import _PG, Backend

S = TaskState


def task(task_id: str, state: TaskState, text: str = "") -> Task:
    t = Task(id=task_id, context_id="ctx", status=TaskStatus(state=state))
    if text:
        t.metadata["text"] = text
    return t


def event(t: Task) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=t.id, context_id=t.context_id, status=t.status)


async def save(
    store: VersionedStore, t: Task, prev: int, ctx: ServerCallContext, with_event: bool = True
) -> int:
    version = await store.save(
        t,
        event=event(t) if with_event else None,
        prev=None,
        prev_version=TaskVersion(prev),
        context=ctx,
    )
    return int(version._value)


async def events(cluster: Cluster, task_id: str) -> list[tuple[int, int]]:
    backend = cluster.store.store
    rows = await backend.read_events(task_id, 0)  # type: ignore[attr-defined]
    from a2a.types import StreamResponse

    return [(seq, StreamResponse.FromString(data).status_update.status.state) for seq, data in rows]


async def open_cluster(durable: Backend) -> Cluster:
    store = await durable.open()
    assert isinstance(store, NodeTaskStore)
    cluster = cluster_for(store)
    assert cluster is not None
    return cluster


async def test_compare_and_set_versions_and_event_rows(
    durable: Backend, alice: ServerCallContext
) -> None:
    cluster = await open_cluster(durable)
    store, tid = cluster.store, str(uuid.uuid4())
    assert await save(store, task(tid, S.TASK_STATE_SUBMITTED), 0, alice) == 1
    with pytest.raises(ConcurrentTaskModificationError):  # a second creator loses
        await save(store, task(tid, S.TASK_STATE_SUBMITTED), 0, alice)
    assert await save(store, task(tid, S.TASK_STATE_WORKING), 1, alice) == 2
    with pytest.raises(ConcurrentTaskModificationError) as stale:  # a writer behind loses
        await save(store, task(tid, S.TASK_STATE_WORKING, "late"), 1, alice)
    assert not isinstance(stale.value, TerminalTaskError)
    assert await save(store, task(tid, S.TASK_STATE_WORKING, "x"), 2, alice, False) == 3
    stored = await store.get(tid, alice)
    assert stored is not None and stored.version == TaskVersion(3)
    assert stored.task.metadata["text"] == "x"
    # the refused writes left no event; the write without an event left none either
    assert await events(cluster, tid) == [(1, S.TASK_STATE_SUBMITTED), (2, S.TASK_STATE_WORKING)]
    assert await store.get(tid, ServerCallContext()) is None  # another owner sees nothing


async def test_cancel_wins_over_a_running_writer_and_terminal_is_final(
    durable: Backend, alice: ServerCallContext
) -> None:
    cluster = await open_cluster(durable)
    store, tid = cluster.store, str(uuid.uuid4())
    await save(store, task(tid, S.TASK_STATE_SUBMITTED), 0, alice)
    await save(store, task(tid, S.TASK_STATE_WORKING), 1, alice)
    # a cancel through another replica read version 1: it still wins over the live task
    assert await save(store, task(tid, S.TASK_STATE_CANCELED), 1, alice) == 3
    # the running replica's COMPLETED (based on version 2) is refused: CANCELED is final
    with pytest.raises(TerminalTaskError):
        await save(store, task(tid, S.TASK_STATE_COMPLETED), 2, alice)
    with pytest.raises(TerminalTaskError):  # even at the current version
        await save(store, task(tid, S.TASK_STATE_COMPLETED), 3, alice)
    with pytest.raises(ConcurrentTaskModificationError):  # a second cancel is refused too
        await save(store, task(tid, S.TASK_STATE_CANCELED, "again"), 3, alice)
    with pytest.raises(ConcurrentTaskModificationError):  # so is a cancel of no task
        await save(store, task(str(uuid.uuid4()), S.TASK_STATE_CANCELED), 0, alice)
    stored = await store.get(tid, alice)
    assert stored is not None and stored.task.status.state == S.TASK_STATE_CANCELED
    assert [s for _, s in await events(cluster, tid)] == [
        S.TASK_STATE_SUBMITTED,
        S.TASK_STATE_WORKING,
        S.TASK_STATE_CANCELED,
    ]


async def test_plain_saves_advance_the_version(durable: Backend, alice: ServerCallContext) -> None:
    cluster = await open_cluster(durable)
    plain, tid = cluster.store.store, str(uuid.uuid4())
    await plain.save(task(tid, S.TASK_STATE_WORKING), alice)  # the lean path and recovery
    await plain.save(task(tid, S.TASK_STATE_WORKING, "two"), alice)
    stored = await cluster.store.get(tid, alice)
    assert stored is not None and stored.version == TaskVersion(2)
    with pytest.raises(ConcurrentTaskModificationError):
        await save(cluster.store, task(tid, S.TASK_STATE_COMPLETED), 1, alice)
    assert await save(cluster.store, task(tid, S.TASK_STATE_COMPLETED), 2, alice) == 3


async def test_retention_prunes_old_events_and_finished_tasks(
    durable: Backend, alice: ServerCallContext
) -> None:
    cluster = await open_cluster(durable)
    store, done, live = cluster.store, str(uuid.uuid4()), str(uuid.uuid4())
    finished = task(done, S.TASK_STATE_COMPLETED)
    finished.status.timestamp.FromNanoseconds(time.time_ns() - 10 * 10**9)
    await save(store, finished, 0, alice)
    await save(store, task(live, S.TASK_STATE_WORKING), 0, alice)
    cluster.event_retention_s = 3600.0
    assert await cluster.prune() == 0  # nothing old enough
    cluster.event_retention_s, cluster.task_retention_s = 0.0, 5.0
    assert await cluster.prune() == 3  # two event rows, one finished task
    assert await store.get(done, alice) is None
    assert await store.get(live, alice) is not None
    assert await events(cluster, live) == []


async def test_a_subscriber_gets_every_later_event_in_order_and_leaves_nothing(
    durable: Backend, alice: ServerCallContext
) -> None:
    writer = await open_cluster(durable)
    # PostgreSQL: a second store instance (another replica) listens; SQLite: the same process
    reader = writer if durable.kind == "sqlite" else await open_cluster(durable)
    reader.stream._reread_s = 60.0  # only a wake-up can deliver within the test's 5 s
    await reader.start()
    try:
        tid = str(uuid.uuid4())
        await save(writer.store, task(tid, S.TASK_STATE_SUBMITTED), 0, alice)
        await save(writer.store, task(tid, S.TASK_STATE_WORKING), 1, alice)  # before subscribe
        got: list[tuple[int, int]] = []

        async def follow() -> None:
            sub = reader.stream.subscribe(tid, after=TaskVersion(1))
            async with aclosing(sub) as stream:
                async for versioned in stream:
                    assert isinstance(versioned.event, TaskStatusUpdateEvent)
                    got.append((int(versioned.version._value), versioned.event.status.state))
                    if versioned.event.status.state == S.TASK_STATE_COMPLETED:
                        return

        follower = asyncio.create_task(follow())
        states = [S.TASK_STATE_WORKING] * 3 + [S.TASK_STATE_COMPLETED]
        for prev, state in enumerate(states, start=2):
            t = task(tid, state, str(prev))
            await save(writer.store, t, prev, alice)
            await writer.stream.publish(tid, None)  # type: ignore[arg-type]  # as the SDK does
        await asyncio.wait_for(follower, 5)
        assert got == [(2, S.TASK_STATE_WORKING), *zip(range(3, 7), states, strict=True)]
        assert reader.stream.subscribers == 0
    finally:
        await reader.aclose()


@pytest.mark.parametrize("durable", _PG, indirect=True)  # LISTEN/NOTIFY is PostgreSQL's
async def test_a_lost_listener_reconnects_and_subscribers_read_what_they_missed(
    durable: Backend, alice: ServerCallContext
) -> None:
    import asyncpg

    from node.store.pg_events import PostgresEventStream
    from tests.store.conftest import PG_URL

    writer, reader = await open_cluster(durable), await open_cluster(durable)
    stream = reader.stream
    assert isinstance(stream, PostgresEventStream)
    stream._reread_s = 60.0  # only the reconnect's wake-up can deliver within the test
    await reader.start()
    try:
        tid = str(uuid.uuid4())
        await save(writer.store, task(tid, S.TASK_STATE_WORKING), 0, alice)
        got: list[int] = []

        async def follow() -> None:
            async with aclosing(stream.subscribe(tid, after=TaskVersion(1))) as events:
                async for versioned in events:
                    got.append(int(versioned.version._value))
                    if versioned.version == TaskVersion(3):
                        return

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.1)  # the follower read nothing and waits for a wake-up
        assert stream._conn is not None
        pid = stream._conn.get_server_pid()
        admin = await asyncpg.connect(PG_URL)
        try:
            await admin.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        # written while nobody listens: their NOTIFYs are lost, their rows are not
        await save(writer.store, task(tid, S.TASK_STATE_WORKING, "2"), 1, alice)
        await save(writer.store, task(tid, S.TASK_STATE_COMPLETED), 2, alice)
        await asyncio.wait_for(follower, 10)
        assert got == [2, 3]
        assert stream._conn is not None and stream._conn.get_server_pid() != pid
    finally:
        await reader.aclose()


def test_the_cards_task_retention_reaches_the_pruner(tmp_path) -> None:
    from node.card import parse_card
    from node.server.app import build_node_app

    def cluster_of(server: dict[str, object]) -> Cluster | None:
        card = parse_card(
            {"id": "kept", "name": "Kept", "description": "d", "server": server}, env={}
        )
        return build_node_app(card, data_dir=tmp_path / str(len(server))).state.node.cluster

    kept = cluster_of({"store": "sqlite"})
    assert kept is not None and kept.task_retention_s is None  # default: finished tasks stay
    pruned = cluster_of({"store": "sqlite", "task_retention_days": 2})
    assert pruned is not None and pruned.task_retention_s == 2 * 86400
    assert cluster_of({"store": "memory"}) is None  # one process, no event rows
