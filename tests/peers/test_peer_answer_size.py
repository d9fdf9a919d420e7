"""What a peer call sends and asks for: no history back; the SDK helpers' message, built faster."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.helpers import new_data_part, new_text_part
from google.protobuf import json_format, struct_pb2

from node.outbound_http import outbound_client
from node.peers.cards import CardFetcher
from node.peers.peer_client import PeerClient
from node.peers.remote_tool import RemoteSkillTool
from node.tooling.context import ToolContext
from tests.peers.peers_support import PeerFactory, peer_card


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


@pytest.mark.parametrize("structured", [True, False])
def test_the_message_sent_equals_the_sdk_helpers_one(structured: bool) -> None:
    """Parts and metadata built with ``Struct.update`` equal the SDK's ``ParseDict`` ones."""
    card = peer_card("http://127.0.0.1:9")
    if not structured:
        card.ClearField("capabilities")  # no SKILL_SCHEMAS extension: the text form
    client = PeerClient("b", card, http=httpx.AsyncClient())
    skill = next(s for s in card.skills if s.id == "add")
    tool = RemoteSkillTool(client, skill, self_id="a")
    assert tool.structured is structured
    arguments: dict[str, Any] = {"a": 2, "b": [1.5, None, True, {"deep": "ü"}]}
    if not structured:
        arguments = {"text": "hi", "data": arguments}
    metadata = {"hop": {"chain": ["a"], "max_hops": 4, "deadline": 1.7e9}, "n": None}
    sent = tool._message(arguments, metadata)
    data = {"skill": "add", "arguments": arguments} if structured else arguments["data"]
    parts = [new_data_part(data)] if structured else [new_text_part("hi"), new_data_part(data)]
    meta = {**metadata, "skill": "add"} if not structured else metadata
    assert list(sent.parts) == parts
    assert sent.metadata == json_format.ParseDict(meta, struct_pb2.Struct())
