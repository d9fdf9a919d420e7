"""A coordinator reading a registry listing keeps every good peer when one entry is bad.

Real peers and registries on loopback: the real registry over a database with a poisoned row,
and a stand-in registry serving hand-made listings (what an older or foreign registry might send).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from node.peers.directory import PeerDirectory
from node.peers.settings import PeersSettings, RegistryConnection
from node.peers.toolset import PeerToolset
from tests.peers.peers_support import REGISTRY_TOKEN, PeerFactory, registry_app
from tests.servers import free_socket, running

B_TOOLS = {"b__add", "b__fail", "b__ask", "b__slow", "b__hops", "b__shout"}
C_TOOLS = {name.replace("b__", "c__") for name in B_TOOLS}


def coordinator(http: httpx.AsyncClient, tools: PeerToolset, registry_url: str) -> PeerDirectory:
    settings = PeersSettings(registry=RegistryConnection(url=registry_url))
    return PeerDirectory(http, settings, self_id="a", toolset=tools)


async def test_a_coordinator_finds_the_good_peers_past_a_poisoned_registry_row(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path
) -> None:
    b = await start_peer()
    c = await start_peer(agent_id="c", name="Peer C")
    db = tmp_path / "registry.db"
    async with running(registry_app(str(db)), free_socket()) as registry_url:
        for peer in (b, c):
            response = await http.post(
                f"{registry_url}/v1/agents",
                json={"card_url": f"{peer.url}/.well-known/agent-card.json"},
                headers={"Authorization": f"Bearer {REGISTRY_TOKEN}"},
            )
            assert response.status_code == 201, response.text
    # What an older registry wrote for a card holding NaN (and then could never list again).
    card = json.dumps({**json_format.MessageToDict(b.card), "name": "Poison"})
    with sqlite3.connect(db) as conn:
        (last_seen,) = conn.execute("SELECT max(last_seen) FROM registry_agents").fetchone()
        conn.execute(
            "INSERT INTO registry_agents (id, card_url, name, description, skills, card,"
            " registered_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "poison",
                "http://127.0.0.1:9/poison.json",
                "Poison",
                "d",
                "[]",
                card[:-1] + ', "weight": NaN}',
                last_seen,
                last_seen,
            ),
        )
    conn.close()

    async with running(registry_app(str(db)), free_socket()) as registry_url:
        tools = PeerToolset()
        peers = coordinator(http, tools, registry_url)
        await peers.refresh()
        assert [(p.id, p.healthy, p.source) for p in peers.peers()] == [
            ("b", True, "registry"),
            ("c", True, "registry"),
        ]
        assert {t.name for t in tools} == B_TOOLS | C_TOOLS
        listing = (await http.get(f"{registry_url}/v1/agents")).json()
        assert listing["unreadable"] == 1


class StandIn:
    """A registry stand-in that serves whatever listing body the test sets."""

    def __init__(self) -> None:
        self.body = b'{"agents": [], "next_page_token": null}'

    def app(self) -> Starlette:
        async def agents(request: Request) -> Response:
            return Response(self.body, media_type="application/json")

        return Starlette(routes=[Route("/v1/agents", agents)])


def card_json(peer: Any, **changes: Any) -> dict[str, Any]:
    return {**json_format.MessageToDict(peer.card), **changes}


def entry(card: Any, entry_id: str = "x", **fields: Any) -> dict[str, Any]:
    return {"id": entry_id, "card_url": "", "card": card, "healthy": True, **fields}


def with_params(peer: Any, entry_id: str, params_literal: str) -> str:
    """An entry for ``peer`` whose skill-schemas extension params are ``params_literal`` (raw)."""
    card = card_json(peer)
    card["capabilities"]["extensions"][0]["params"] = "@@"
    return json.dumps(entry(card, entry_id)).replace('"@@"', params_literal)


async def test_one_malformed_entry_in_a_listing_costs_only_itself(
    http: httpx.AsyncClient, start_peer: PeerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    b = await start_peer()
    c = await start_peer(agent_id="c", name="Peer C")
    bad = [
        "42",
        '"an entry"',
        "null",
        json.dumps({"card": card_json(b)}),  # no id
        json.dumps(entry(card_json(b), "skills", skills="none")),
        json.dumps(entry(card_json(b), "skills2", skills=[1, 2])),
        json.dumps(entry(None, "nocard")),
        json.dumps(entry([1, 2], "listcard")),
        json.dumps(entry(card_json(b, name=["B"]), "badname")),
        json.dumps(entry(card_json(b), "badurl", card_url=["x"])),
        with_params(b, "huge", '{"agent_id": "huge", "n": ' + "9" * 400 + "}"),
        with_params(b, "nan", '{"agent_id": "nan", "n": NaN}'),
        with_params(b, "inf", '{"schemas": {"add": {"type": "object", "x": -Infinity}}}'),
        with_params(b, "list", '{"agent_id": ["not", "a", "string"], "n": Infinity}'),
    ]
    good = [json.dumps(entry(card_json(b), "b")), json.dumps(entry(card_json(c), "c"))]
    stand_in = StandIn()
    stand_in.body = (
        '{"agents": [' + ", ".join([good[0], *bad, good[1]]) + '], "next_page_token": null}'
    ).encode()
    async with running(stand_in.app(), free_socket(), lifespan="off") as registry_url:
        tools = PeerToolset()
        peers = coordinator(http, tools, registry_url)
        with caplog.at_level(logging.WARNING, logger="node.peers.directory"):
            await peers.refresh()
        assert [p.id for p in peers.peers()] == ["b", "c"]
        assert {t.name for t in tools} == B_TOOLS | C_TOOLS
        assert peers.skipped_entries == len(bad)
        warned = [r for r in caplog.records if r.name == "node.peers.directory"]
        assert len(warned) == len(bad)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="node.peers.directory"):
            await peers.refresh()  # the same bad entries are not logged again
        assert [r for r in caplog.records if r.name == "node.peers.directory"] == []
        assert [p.id for p in peers.peers()] == ["b", "c"]


async def test_a_listing_too_deep_to_parse_keeps_the_last_view(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    b = await start_peer()
    stand_in = StandIn()
    good = json.dumps(entry(card_json(b), "b"))
    stand_in.body = ('{"agents": [' + good + '], "next_page_token": null}').encode()
    async with running(stand_in.app(), free_socket(), lifespan="off") as registry_url:
        tools = PeerToolset()
        peers = coordinator(http, tools, registry_url)
        await peers.refresh()
        assert [(p.id, p.healthy) for p in peers.peers()] == [("b", True)]
        deep = "[" * 100_000 + "]" * 100_000
        stand_in.body = (
            '{"agents": [' + good + ", " + deep + '], "next_page_token": null}'
        ).encode()
        await peers.refresh()  # unreadable as a whole: the registry counts as unavailable
        assert [(p.id, p.healthy) for p in peers.peers()] == [("b", False)]
        assert {t.name for t in tools} == B_TOOLS
