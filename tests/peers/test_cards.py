from __future__ import annotations

import httpx
import pytest
from a2a.types import AgentCapabilities, AgentCard, AgentExtension
from google.protobuf import json_format, struct_pb2

from node.errors import PeerError
from node.peers.cards import CardFetcher, agent_id, card_from_json, card_url, skill_schemas
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


V03_CARD = {
    "name": "Legacy Agent",
    "description": "An a2a-sdk 0.3 server",
    "url": "http://h:1/",
    "version": "1.0.0",
    "protocolVersion": "0.3.0",
    "preferredTransport": "HTTP+JSON",
    "additionalInterfaces": [{"url": "h:2", "transport": "GRPC"}],
    "capabilities": {"streaming": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["t"]}],
}


def test_a_0_3_card_becomes_interfaces_of_version_0_3() -> None:
    card = card_from_json(V03_CARD)
    assert [(i.protocol_binding, i.url) for i in card.supported_interfaces] == [
        ("HTTP+JSON", "http://h:1/"),
        ("GRPC", "h:2"),
    ]
    assert {i.protocol_version for i in card.supported_interfaces} <= {"0.3", "0.3.0"}
    assert [s.id for s in card.skills] == ["echo"]
    assert agent_id(card) == "legacy-agent"
    assert skill_schemas(card) == {}


def test_a_broken_0_3_card_is_a_clear_peer_error() -> None:
    broken = {**V03_CARD, "skills": [{"id": "echo"}]}
    with pytest.raises(PeerError, match=r"invalid 0\.3 agent card: .*skills\.0\.name"):
        card_from_json(broken)
