"""A node on the PostgreSQL task store: long client ids, listing, and recovery of working tasks."""

from __future__ import annotations

import os
import uuid

import asyncpg
import pytest
from a2a.types import ListTasksRequest, TaskState

from node.client import NodeClient, artifacts_of, skill_message

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")
pytestmark = [pytest.mark.postgres]


async def test_a_node_on_postgres_serves_tasks_with_long_ids(start_node, http):
    url = await start_node(store=PG_URL)
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        message = skill_message("calculate", {"expression": "3 * 3"})
        message.context_id = "ctx-" + uuid.uuid4().hex * 2  # 68 characters
        task = await client.send(message)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert artifacts_of(task) == {"calculate": [9]}
        assert (await client.get(task.id)).context_id == message.context_id
        listed = await client.client.list_tasks(ListTasksRequest(context_id=message.context_id))
        assert [t.id for t in listed.tasks] == [task.id]
    conn = await asyncpg.connect(PG_URL)
    try:
        count = await conn.fetchval("SELECT count(*) FROM tasks WHERE id = $1", task.id)
    finally:
        await conn.close()
    assert count == 1
