"""Durable A2A task stores: a SQLite file (default) or PostgreSQL, and restart recovery."""

from __future__ import annotations

from node.store.factory import open_task_store
from node.store.lifecycle import NodeTaskStore
from node.store.recovery import fail_orphaned
from node.store.sqlite import SqliteTaskStore

__all__ = ["NodeTaskStore", "SqliteTaskStore", "fail_orphaned", "open_task_store"]
