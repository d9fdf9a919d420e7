"""A blocking peer call asks for the task without its history (the node never reads it)."""

from __future__ import annotations

from typing import Any

import httpx

from node.outbound_http import outbound_client
from node.peers.cards import CardFetcher
from node.peers.peer_client import PeerClient
from node.peers.remote_tool import RemoteSkillTool
from node.tooling.context import ToolContext
from tests.peers.peers_support import PeerFactory


async def test_the_peer_answers_a_blocking_call_without_the_history(
    start_peer: PeerFactory,
) -> None:
    peer = await start_peer(streaming=False)
    answers: list[Any] = []

    async def keep(response: httpx.Response) -> None:
        await response.aread()
        answers.append(response.json())

    async with outbound_client(timeout=5.0, event_hooks={"response": [keep]}) as http:
        card = await CardFetcher(http).fetch(peer.url)
        answers.clear()  # the card's fetch
        client = PeerClient("b", card, http=http)
        skill = next(s for s in card.skills if s.id == "add")
        tool = RemoteSkillTool(client, skill, self_id="a")
        assert await tool.execute({"a": 2, "b": 3}, ToolContext()) == {"sum": 5}
    [answer] = answers
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["artifacts"]
    assert "history" not in task  # the peer's own copy of our message and its notes
