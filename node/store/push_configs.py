"""Push-notification configs (webhooks per task), stored beside the node's tasks.

A config is the SDK's ``TaskPushNotificationConfig`` (url, token, authentication), kept per
(owner, task, config id): the owner is the caller's principal (``owner_resolver(context)``, the
same rule as the task stores), so one principal never reads, lists or deletes another's configs.
Delivery reads every config of a task across owners (:meth:`get_info_for_dispatch`): the owner was
checked when the config was created (the SDK handler refuses a task the caller cannot see).

The stores follow the SDK's ``PushNotificationConfigStore`` interface (the SDK handler routes
create/get/list/delete to it on every binding) with a node's lifecycle (``initialize``/``close``),
and the same guards on every store: the task and config ids within :mod:`node.store.ids`, at most
:data:`MAX_CONFIGS_PER_TASK` configs per owner and task (so a caller cannot multiply the node's
outbound traffic), both refused as invalid params (-32602).

:func:`open_push_store` opens the config store that goes with a task store: the same SQLite file
(its own table, :mod:`node.store.push_sqlite`), the same PostgreSQL database
(:mod:`node.store.push_postgres`) or memory. Why not the SDK's
``DatabasePushNotificationConfigStore``: it needs a SQLAlchemy engine beside the node's own
connections (on SQLite, the SDK's SQLAlchemy path measured 6-8 times the node's CPU per statement,
see :mod:`node.store.sqlite`), delivery reads configs for every task event, and its primary key
``(task_id, config_id)`` ignores the owner and caps task ids at 36 characters.
"""

from __future__ import annotations

from abc import abstractmethod

from a2a.server.context import ServerCallContext
from a2a.server.owner_resolver import OwnerResolver, resolve_user_scope
from a2a.server.tasks import InMemoryPushNotificationConfigStore, PushNotificationConfigStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError

from node.store.ids import check_id, check_owner
from node.store.lifecycle import NodeTaskStore
from node.store.memory import MemoryTaskStore
from node.store.sqlite import SqliteTaskStore

MAX_CONFIGS_PER_TASK = 10


class PushConfigStore(PushNotificationConfigStore):
    """The SDK's push-config store interface plus the lifecycle a node drives."""

    owner_resolver: OwnerResolver

    @abstractmethod
    async def initialize(self) -> None:
        """Connect and create the schema (otherwise done on first use)."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections (a later call reopens)."""


def checked_config(
    task_id: str, config: TaskPushNotificationConfig, owner: str, existing_ids: list[str]
) -> TaskPushNotificationConfig:
    """``config`` as stored (task id set, id defaulted to the task id), or -32602 naming why.

    ``existing_ids`` are the ids the owner already has on this task.
    """
    check_owner(owner)
    check_id(task_id, "taskId")
    stored = normalize_push_notification_config(task_id, config)
    check_id(stored.id, "pushNotificationConfig.id")
    if stored.id not in existing_ids and len(existing_ids) >= MAX_CONFIGS_PER_TASK:
        raise InvalidParamsError(
            f"task {task_id} already has {MAX_CONFIGS_PER_TASK} push notification configs "
            "(the most one caller may set); delete one first"
        )
    return stored


class MemoryPushConfigStore(InMemoryPushNotificationConfigStore, PushConfigStore):
    """The SDK's in-memory config store with the node's guards (lost on restart)."""

    def __init__(self, owner_resolver: OwnerResolver = resolve_user_scope) -> None:
        super().__init__(owner_resolver=owner_resolver)

    async def initialize(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to release."""

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        existing = [c.id for c in await self.get_info(task_id, context)]
        checked = checked_config(
            task_id, notification_config, self.owner_resolver(context), existing
        )
        return await super().set_info(task_id, checked, context)


def open_push_store(task_store: NodeTaskStore) -> PushConfigStore:
    """The push-config store that lives where ``task_store`` keeps its tasks."""
    resolver: OwnerResolver = getattr(task_store, "owner_resolver", resolve_user_scope)
    if isinstance(task_store, SqliteTaskStore):
        from node.store.push_sqlite import SqlitePushConfigStore

        return SqlitePushConfigStore(
            task_store.path, table=push_table(task_store.table), owner_resolver=resolver
        )
    if isinstance(task_store, MemoryTaskStore):
        return MemoryPushConfigStore(owner_resolver=resolver)
    dsn = getattr(task_store, "dsn", None)
    if isinstance(dsn, str):  # PostgresTaskStore (imported only with asyncpg installed)
        from node.store.push_postgres import PostgresPushConfigStore

        table = push_table(str(getattr(task_store, "table", "tasks")))
        return PostgresPushConfigStore(dsn, table=table, owner_resolver=resolver)
    raise TypeError(f"no push-config store goes with {type(task_store).__name__}")


def push_table(task_table: str) -> str:
    """The config table beside a task table: ``push_configs`` for ``tasks``."""
    return "push_configs" if task_table == "tasks" else f"{task_table}_push_configs"
