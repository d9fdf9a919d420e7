"""The SDK path reads nothing from the store for a new task before its first save.

The request handler names the task id the SDK generates for a new task to the versioned store
(:meth:`node.store.versioned.VersionedStore.expect_new`), which answers the SDK's read of it
("not found", as the table would) without a query; a follow-up to an existing task reads it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from node.card import parse_card
from node.server.app import build_node_app
from tests.server.conftest import TEST_TOOLS, card_data
from tests.servers import InProcessApps


def _send(parts: list[dict[str, Any]], **message: Any) -> dict[str, Any]:
    body = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts, **message}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": body}}


async def test_new_tasks_read_nothing_follow_ups_read_their_task(
    apps: InProcessApps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = parse_card(card_data(server={"lean_path": False}), env={})
    built: dict[str, Starlette] = {}

    def factory(public_url: str) -> Starlette:
        built["app"] = build_node_app(
            card, public_url=public_url, data_dir=tmp_path / "n", store="sqlite", tools=TEST_TOOLS
        )
        return built["app"]

    url = (await apps.start(factory, name="n")) + "/"
    backend = built["app"].state.node.cluster.store.store
    reads: list[str] = []
    get_versioned = backend.get_versioned

    async def counted(task_id: str, owner: str) -> Any:
        reads.append(task_id)
        return await get_versioned(task_id, owner)

    monkeypatch.setattr(backend, "get_versioned", counted)
    async with apps.client(timeout=10.0, headers={"A2A-Version": "1.0"}) as http:
        calc = {"data": {"skill": "calculate", "arguments": {"expression": "1+1"}}}
        done = (await http.post(url, json=_send([calc]))).json()["result"]["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        paused = (await http.post(url, json=_send([{"data": {"skill": "calculate"}}]))).json()
        task = paused["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert reads == []
        follow = _send([{"data": {"expression": "2+2"}}], taskId=task["id"])
        answer = (await http.post(url, json=follow)).json()["result"]["task"]
        assert answer["id"] == task["id"] and answer["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["id"] in reads
        assert not built["app"].state.node.cluster.store._new  # nothing left behind
