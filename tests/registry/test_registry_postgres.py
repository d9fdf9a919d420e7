"""The same registry on PostgreSQL (set A2A_NODE_TEST_PG_URL=postgresql+asyncpg://...)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.registry.conftest import fresh_pg_database

# Collected only when a PostgreSQL URL is given (see collect_ignore in conftest.py).
pytestmark = [pytest.mark.postgres]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_pg_database() as url:  # tests running at once never share the table
        yield url


async def test_register_search_and_restart_on_postgres(
    make_client, card_server, pg_url, clock
) -> None:
    url = card_server.put_card("/a.json", "Alpha", skills=[card_server.skill("s", "t")])
    async with make_client(db=pg_url) as client:
        assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 201
        assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 200
        await client.post("/v1/agents", json={"card_url": card_server.put_card("/b.json", "Beta")})
        clock.advance(10)
        assert (await client.put("/v1/agents/beta/heartbeat")).status_code == 200
        assert (await client.delete("/v1/agents/alpha")).status_code == 204
    async with make_client(db=pg_url) as client:
        agents = (await client.get("/v1/agents")).json()["agents"]
        assert [a["id"] for a in agents] == ["beta"]
        clock.advance(85)  # alpha gone, beta 85 s since its beat: unhealthy, not yet evicted
        assert (await client.get("/v1/agents/beta")).json()["healthy"] is False
        clock.advance(10)
        assert (await client.get("/v1/agents")).json()["agents"] == []
