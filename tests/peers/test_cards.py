from __future__ import annotations

import httpx
import pytest
from a2a.types import AgentCapabilities, AgentCard, AgentExtension
from google.protobuf import json_format, struct_pb2

from node.errors import PeerError
from node.peers.cards import CardFetcher, agent_id, card_url, skill_schemas
from node.protocol import HOP
from tests.peers.peers_support import SCHEMAS, PeerFactory, peer_card
from tests.servers import free_socket, url_of


def test_card_url_accepts_a_base_or_a_card_url() -> None:
    assert card_url("http://h:1") == "http://h:1/.well-known/agent-card.json"
    assert card_url("http://h:1/a/") == "http://h:1/a/.well-known/agent-card.json"
    assert card_url("http://h:1/cards/x.json") == "http://h:1/cards/x.json"


def test_agent_id_is_declared_or_a_name_slug() -> None:
    assert agent_id(peer_card("http://h", agent_id="calc-1")) == "calc-1"
    params = json_format.ParseDict({"agent_id": "via-hop"}, struct_pb2.Struct())
    hop_only = AgentCard(
        name="X",
        capabilities=AgentCapabilities(extensions=[AgentExtension(uri=HOP, params=params)]),
    )
    assert agent_id(hop_only) == "via-hop"
    assert agent_id(AgentCard(name="Weather Bot 2!")) == "weather-bot-2"


def test_skill_schemas_come_back_with_integers() -> None:
    schemas = skill_schemas(peer_card("http://h"))
    assert schemas == SCHEMAS
    assert skill_schemas(AgentCard(name="plain")) == {}


async def test_fetch_revalidates_with_the_etag(start_peer: PeerFactory) -> None:
    peer = await start_peer()
    statuses: list[int] = []

    async def record(response: httpx.Response) -> None:
        statuses.append(response.status_code)

    async with httpx.AsyncClient(event_hooks={"response": [record]}) as http:
        fetcher = CardFetcher(http)
        first = await fetcher.fetch(peer.url)
        second = await fetcher.fetch(peer.url)
    assert statuses == [200, 304]
    assert first == second == peer.card


async def test_unreachable_card_is_a_peer_error(http: httpx.AsyncClient) -> None:
    sock = free_socket()
    with pytest.raises(PeerError, match="cannot fetch the card"):
        await CardFetcher(http).fetch(url_of(sock))
    sock.close()
