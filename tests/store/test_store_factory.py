"""open_task_store, the stores' initialize/close and the store-agnostic fail_orphaned."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task

from node.errors import ConfigError
from node.store import NodeTaskStore, SqliteTaskStore, fail_orphaned, open_task_store
from node.store.postgres import PostgresTaskStore
from tests.store.conftest import caller


def test_memory(tmp_path: Path) -> None:
    assert isinstance(open_task_store("memory", tmp_path), InMemoryTaskStore)


@pytest.mark.parametrize(
    ("spec", "relative", "synchronous"),
    [
        ("sqlite", "tasks.db", "NORMAL"),
        (" sqlite ", "tasks.db", "NORMAL"),
        ("sqlite:///sub/x.db", "sub/x.db", "NORMAL"),
        ("sqlite:///x.db?synchronous=full", "x.db", "FULL"),
    ],
)
def test_sqlite_forms(tmp_path: Path, spec: str, relative: str, synchronous: str) -> None:
    store = open_task_store(spec, tmp_path)
    assert isinstance(store, SqliteTaskStore)
    assert store.path == tmp_path / relative
    assert store.synchronous == synchronous


def test_sqlite_absolute_path(tmp_path: Path) -> None:
    store = open_task_store(f"sqlite:///{tmp_path}/abs.db", Path("elsewhere"))
    assert isinstance(store, SqliteTaskStore)
    assert store.path == tmp_path / "abs.db"


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+asyncpg"])
def test_postgres_forms_do_not_connect_yet(tmp_path: Path, scheme: str) -> None:
    store = open_task_store(f"{scheme}://u:p@127.0.0.1:1/db", tmp_path)
    assert isinstance(store, PostgresTaskStore)
    assert store.dsn == "postgresql://u:p@127.0.0.1:1/db"


@pytest.mark.parametrize(
    "spec",
    ["", "redis://x", "sqlite:///", "sqlite://relative.db", "sqlite:///x.db?mode=ro", "mysql://x"],
)
def test_unknown_forms_list_the_accepted_ones(tmp_path: Path, spec: str) -> None:
    with pytest.raises(ConfigError, match=r"expected one of|only option"):
        open_task_store(spec, tmp_path)


def test_password_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        open_task_store("mongodb://user:s3cret@host/db", tmp_path)
    assert "s3cret" not in str(info.value)
    assert "postgresql://" in str(info.value)


@pytest.mark.parametrize("spec", ["memory", "sqlite", "postgresql://u:p@127.0.0.1:1/db"])
def test_every_store_has_the_node_lifecycle(spec: str, tmp_path: Path) -> None:
    assert isinstance(open_task_store(spec, tmp_path), NodeTaskStore)


async def test_memory_store_opens_and_closes(tmp_path: Path) -> None:
    store = open_task_store("memory", tmp_path)
    await store.initialize()
    await store.close()


async def test_sqlite_store_closes_its_connections(tmp_path: Path) -> None:
    store = open_task_store("sqlite", tmp_path)
    await store.save(Task(id="t", context_id="c"), caller(""))
    await store.close()
    assert isinstance(store, SqliteTaskStore)
    assert store._reader is None


async def test_fail_orphaned_on_memory_is_a_no_op() -> None:
    assert await fail_orphaned(InMemoryTaskStore()) == 0


async def test_postgres_connection_failure_is_a_store_error(tmp_path: Path) -> None:
    from node.errors import StoreError

    store = open_task_store("postgresql://u:p@127.0.0.1:1/db", tmp_path)
    with pytest.raises(StoreError, match="cannot connect"):
        await store.get("x", caller(""))
