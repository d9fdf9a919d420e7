"""A blocking send of one instant call goes from SUBMITTED to its final state without WORKING.

The executor skips the WORKING update (no message) when the sender waits only for the settled
task (:data:`node.executor.SETTLED_ONLY`) and the one call runs instantly: the final task is the
same (``tests/server/test_lean_path.py`` compares it with the lean path's, which folds WORKING in),
one event and one store write fewer. A stream, ``returnImmediately``, a call that does not run
instantly, or two calls still move to WORKING first.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
from a2a.types import StreamResponse, TaskState
from starlette.applications import Starlette

from node.card import parse_card
from node.server.app import build_node_app
from tests.server.conftest import TEST_TOOLS, card_data
from tests.servers import InProcessApps

S = TaskState


def _send(parts: list[dict[str, Any]], **configuration: Any) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    params: dict[str, Any] = {"message": message}
    if configuration:
        params["configuration"] = configuration
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


def _call(skill: str, **arguments: Any) -> dict[str, Any]:
    return {"data": {"skill": skill, "arguments": arguments}}


async def _events(app: Starlette, task_id: str) -> list[str]:
    """The stored event rows of ``task_id``: ``task``, ``artifact`` or the status' state."""
    rows = await app.state.node.handler._tasks.read_events(task_id, 0)
    kinds = []
    for _, data in rows:
        event = StreamResponse.FromString(data)
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            kinds.append(S.Name(event.status_update.status.state))
        else:
            kinds.append(kind or "")
    return kinds


async def _settled(http: httpx.AsyncClient, url: str, task_id: str) -> None:
    for _ in range(500):
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        task = (await http.post(url, json=get)).json()["result"]
        if task["status"]["state"] == "TASK_STATE_COMPLETED":
            return
    raise AssertionError(f"task {task_id} did not complete")


async def test_only_a_blocking_send_of_one_instant_call_skips_working(
    apps: InProcessApps, tmp_path: Path
) -> None:
    card = parse_card(card_data(server={"lean_path": False}), env={})
    built: dict[str, Starlette] = {}

    def factory(public_url: str) -> Starlette:
        built["app"] = build_node_app(
            card, public_url=public_url, data_dir=tmp_path / "n", store="sqlite", tools=TEST_TOOLS
        )
        return built["app"]

    url = (await apps.start(factory, name="n")) + "/"
    calc = _call("calculate", expression="1+1")
    done = ["task", "artifact_update", "TASK_STATE_COMPLETED"]
    async with apps.client(timeout=10.0, headers={"A2A-Version": "1.0"}) as http:
        blocking = (await http.post(url, json=_send([calc]))).json()["result"]["task"]
        assert blocking["status"]["state"] == "TASK_STATE_COMPLETED"
        assert blocking["history"][0]["parts"] == [calc] and len(blocking["history"]) == 1
        assert await _events(built["app"], blocking["id"]) == done

        later = (await http.post(url, json=_send([calc], returnImmediately=True))).json()
        await _settled(http, url, later["result"]["task"]["id"])
        assert await _events(built["app"], later["result"]["task"]["id"]) == [
            "task",
            "TASK_STATE_WORKING",
            *done[1:],
        ]

        stream = {**_send([calc]), "method": "SendStreamingMessage"}
        async with http.stream("POST", url, json=stream) as response:
            lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
        assert "TASK_STATE_WORKING" in "".join(lines)

        slow = (await http.post(url, json=_send([_call("slow", seconds=0)]))).json()["result"]
        assert await _events(built["app"], slow["task"]["id"]) == [
            "task",
            "TASK_STATE_WORKING",
            *done[1:],
        ]
