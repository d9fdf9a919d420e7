"""Several nodes in one process: peers' skills as tools, pipelines across nodes, hop guard.

A node calls its peers (and fetches pages) with its own HTTP client, so nodes that call others, and
what they call, are real servers on loopback (``serve``); a node on its own runs in-process
(``apps``).
"""

from __future__ import annotations

from pathlib import Path

from a2a.types import TaskState
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.routing import Route

from node.card import load_card, parse_card
from node.client import NodeClient, artifacts_of, skill_message, status_text
from node.peers.settings import StaticPeer
from node.server.app import build_node_app

CARDS = Path(__file__).resolve().parents[2] / "cards"
PAGE = """<html><head><title>Otters</title></head><body>
<p>Sea otters use stones as tools. Otters eat urchins and clams.</p>
<p>Otters hold hands while sleeping. Sea otters live in kelp forests.</p></body></html>"""


async def start_card(start, tmp_path, path: Path, **changes) -> str:
    """Start the card at ``path`` with ``start``: ``serve`` (a socket) or ``apps.start``."""
    card = load_card(path)
    for key, value in changes.items():
        card = card.model_copy(update={key: value})
    return await start(
        lambda url: build_node_app(
            card, public_url=url, data_dir=tmp_path / card.id, store="memory"
        )
    )


async def test_a_pipeline_crosses_three_nodes(serve, tmp_path):
    async def page(_):
        return HTMLResponse(PAGE)

    async def ok(_):
        return PlainTextResponse("ok")

    site = await serve(lambda _: Starlette(routes=[Route("/", page), Route("/healthz", ok)]))
    loopback = load_card(CARDS / "web.yaml").network.model_copy(
        update={"allow_cidrs": ["127.0.0.0/8"]}
    )
    web = await start_card(serve, tmp_path, CARDS / "web.yaml", network=loopback)
    text = await start_card(serve, tmp_path, CARDS / "text.yaml")
    coordinator_card = load_card(CARDS / "coordinator.yaml")
    peers = coordinator_card.peers.model_copy(
        update={"static": [StaticPeer(url=web), StaticPeer(url=text)]}
    )
    coordinator_card = coordinator_card.model_copy(update={"peers": peers})
    coordinator = await serve(
        lambda url: build_node_app(
            coordinator_card, public_url=url, data_dir=tmp_path / "coord", store="memory"
        )
    )
    async with NodeClient.connect(coordinator, streaming=False) as client:
        task = await client.call("page_report", {"url": f"{site}/", "top": 3})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    (report,) = artifacts_of(task)["page_report"]
    assert report["stats"]["words"] > 10
    assert report["keywords"][0]["term"] == "otters"
    assert "otters" in report["summary"].lower()


async def test_a_message_that_already_passed_through_a_node_is_rejected(apps, http, tmp_path):
    url = await start_card(apps.start, tmp_path, CARDS / "data.yaml")
    hop = {"urn:a2a-node:ext:hop:v1": {"chain": ["coordinator", "data"], "max_hops": 4}}
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        task = await client.send(skill_message("calculate", {"expression": "1"}, metadata=hop))
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        assert "coordinator" in status_text(task) and "data" in status_text(task)
        long_chain = {"urn:a2a-node:ext:hop:v1": {"chain": ["a", "b", "c", "d"], "max_hops": 4}}
        task = await client.send(
            skill_message("calculate", {"expression": "1"}, metadata=long_chain)
        )
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        expired = {"urn:a2a-node:ext:hop:v1": {"chain": ["a"], "max_hops": 4, "deadline": 1.0}}
        task = await client.send(skill_message("calculate", {"expression": "1"}, metadata=expired))
        assert task.status.state == TaskState.TASK_STATE_REJECTED
        assert "deadline" in status_text(task)


async def test_an_unreachable_peer_fails_the_pipeline_naming_it(apps, http, tmp_path):
    card = parse_card(
        {
            "id": "lonely",
            "name": "Lonely",
            "description": "Calls a peer that is gone.",
            "pipelines": [
                {
                    "id": "compute",
                    "description": "Forward to the data node.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"expression": {"type": "string"}},
                    },
                    "steps": [
                        {
                            "id": "r",
                            "tool": "data__calculate",
                            "arguments": {"expression": "$input/expression"},
                        }
                    ],
                }
            ],
        },
        env={},
    )
    url = await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "l", store="memory")
    )
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        task = await client.call("compute", {"expression": "1"})
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "data__calculate" in status_text(task)
