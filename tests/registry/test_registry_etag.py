"""Conditional GET on listings: a weak ETag over the body minus heartbeat times; 304 on a match."""

from __future__ import annotations

import httpx
import pytest

from node.registry.conditional import etag, matches
from tests.registry.conftest import CardServer, FakeClock


async def register(client: httpx.AsyncClient, card_server: CardServer, agent_id: str) -> None:
    url = card_server.put_card(f"/{agent_id}.json", agent_id.title(), agent_id=agent_id)
    assert (await client.post("/v1/agents", json={"card_url": url})).is_success


async def test_an_unchanged_listing_answers_304_without_a_body(
    client: httpx.AsyncClient, card_server: CardServer
) -> None:
    await register(client, card_server, "alpha")
    first = await client.get("/v1/agents", params={"include_card": "true"})
    tag = first.headers["etag"]
    assert tag == etag(first.content) and first.headers["cache-control"] == "no-cache"
    again = await client.get(
        "/v1/agents", params={"include_card": "true"}, headers={"If-None-Match": tag}
    )
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == tag


async def test_a_change_in_the_listing_changes_its_etag(
    client: httpx.AsyncClient, card_server: CardServer
) -> None:
    await register(client, card_server, "alpha")
    tag = (await client.get("/v1/agents")).headers["etag"]
    await register(client, card_server, "beta")
    changed = await client.get("/v1/agents", headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag
    assert [a["id"] for a in changed.json()["agents"]] == ["alpha", "beta"]
    other_query = await client.get(
        "/v1/agents", params={"q": "beta"}, headers={"If-None-Match": tag}
    )
    assert other_query.status_code == 200  # a tag is the tag of one exact body


async def test_heartbeats_keep_the_etag_and_a_change_of_health_changes_it(
    client: httpx.AsyncClient, card_server: CardServer, clock: FakeClock
) -> None:
    """A node polling its registry is told "unchanged" while its peers merely stay alive."""
    await register(client, card_server, "alpha")
    first = await client.get("/v1/agents")
    tag = first.headers["etag"]
    assert tag.startswith('W/"')
    clock.advance(5)
    assert (await client.put("/v1/agents/alpha/heartbeat")).status_code == 200
    beaten = await client.get("/v1/agents", headers={"If-None-Match": tag})
    assert beaten.status_code == 304, beaten.text
    fresh = await client.get("/v1/agents")
    assert (
        fresh.json()["agents"][0]["last_heartbeat"] != first.json()["agents"][0]["last_heartbeat"]
    )
    clock.advance(60)  # past the 30 s TTL: alpha turns unhealthy, which a poller must see
    stale = await client.get("/v1/agents", headers={"If-None-Match": tag})
    assert stale.status_code == 200 and stale.json()["agents"][0]["healthy"] is False
    assert stale.headers["etag"] != tag


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ('"abc"', True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ("*", True),
        ('"abd"', False),
        ("", False),
        (None, False),
    ],
)
def test_if_none_match_uses_the_weak_comparison(header: str | None, expected: bool) -> None:
    assert matches(header, '"abc"') is expected
