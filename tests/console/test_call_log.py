"""The calls a task made (``a2a_node_calls`` in its metadata): what the console draws as a timeline.

The coordinator's ``compute`` pipeline calls the data node's ``calculate`` over A2A (real servers
on loopback): the final task names the pipeline call and the peer call, with the peer's task id.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict

from node.call_log import CALLS_KEY, MAX_ERROR_CHARS, CallLog
from node.card import load_card
from node.client import NodeClient, skill_message, status_text
from node.peers.settings import StaticPeer
from node.server.app import build_node_app

CARDS = Path(__file__).resolve().parents[2] / "cards"


def calls(task: Task) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = MessageToDict(task.metadata).get(CALLS_KEY, [])
    return records


async def network(serve: Any, tmp_path: Path) -> tuple[str, str]:
    data_card = load_card(CARDS / "data.yaml")
    data = await serve(
        lambda url: build_node_app(
            data_card, public_url=url, data_dir=tmp_path / "d", store="memory"
        )
    )
    card = load_card(CARDS / "coordinator.yaml")
    card = card.model_copy(
        update={"peers": card.peers.model_copy(update={"static": [StaticPeer(url=data)]})}
    )
    coordinator = await serve(
        lambda url: build_node_app(card, public_url=url, data_dir=tmp_path / "c", store="memory")
    )
    return coordinator, data


async def test_a_task_records_its_calls_and_the_peers_task(serve: Any, tmp_path: Path) -> None:
    coordinator, data = await network(serve, tmp_path)
    async with NodeClient.connect(coordinator, streaming=False) as client:
        task = await client.send(skill_message("compute", {"expression": "6 * 7"}))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        peer_call, pipeline_call = calls(task)  # in the order they ended
        failed = await client.send(skill_message("compute", {"expression": "1 / 0"}))
    assert pipeline_call["tool"] == "compute" and pipeline_call["peer"] is None
    assert peer_call["tool"] == "data__calculate" and peer_call["peer"] == "data"
    assert peer_call["outcome"] == "ok" and peer_call["error"] is None
    assert 0 < peer_call["duration_ms"] <= pipeline_call["duration_ms"]
    assert datetime.fromisoformat(pipeline_call["started_at"]) <= datetime.fromisoformat(
        peer_call["started_at"]
    )
    assert set(peer_call) == {
        "tool", "peer", "remote_task_id", "started_at", "duration_ms", "outcome", "error",
        "trace_id",
    }  # fmt: skip
    async with NodeClient.connect(data, streaming=False) as client:  # the peer's own task
        remote = await client.get(peer_call["remote_task_id"])
    assert remote.status.state == TaskState.TASK_STATE_COMPLETED

    assert failed.status.state == TaskState.TASK_STATE_FAILED
    peer_call = calls(failed)[0]
    assert peer_call["peer"] == "data" and peer_call["outcome"] == "error"
    assert "division by zero" in peer_call["error"] and peer_call["remote_task_id"]


def test_a_log_bounds_errors_and_records() -> None:
    log = CallLog()
    for _ in range(250):
        log.close(log.open("t", "peer:x"), ok=False, error="e" * 2000)
    assert len(log.records) == 200 and log.dropped == 50
    assert len(log.records[0]["error"]) == MAX_ERROR_CHARS and log.records[0]["peer"] == "x"
