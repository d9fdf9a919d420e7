"""A started node has frozen its start-up heap, so full collections skip it (node.server.heap)."""

from __future__ import annotations

import gc

from node.server.heap import freeze_startup_heap
from tests.server.conftest import NodeFactory


async def test_a_started_node_has_frozen_the_heap_once(start_node: NodeFactory) -> None:
    await start_node(store="memory")
    frozen = gc.get_freeze_count()
    assert frozen > 10_000  # the SDK, protobuf, pydantic, uvicorn: far more than this
    assert freeze_startup_heap() is False  # once per process
    assert gc.get_freeze_count() == frozen
