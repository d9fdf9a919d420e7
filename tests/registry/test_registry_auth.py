"""Bearer tokens: writes need the token when one is set; reads only when configured."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pydantic
import pytest

from node.registry import RegistrySettings

TOKEN = "write-secret-123"
READ_TOKEN = "read-secret-456"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def guarded(make_client) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client(token=TOKEN) as client:
        yield client


async def test_write_without_token_is_401(guarded: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Alpha")
    response = await guarded.post("/v1/agents", json={"card_url": url})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"
    not_bearer = await guarded.post(
        "/v1/agents", json={"card_url": url}, headers={"Authorization": "Basic eDp5"}
    )
    assert not_bearer.status_code == 401


async def test_write_with_wrong_token_is_403(guarded: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Alpha")
    response = await guarded.post("/v1/agents", json={"card_url": url}, headers=bearer("nope"))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert (await guarded.get("/v1/agents")).json()["agents"] == []


async def test_every_write_needs_the_token(guarded: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/a.json", "Alpha")
    ok = await guarded.post("/v1/agents", json={"card_url": url}, headers=bearer(TOKEN))
    assert ok.status_code == 201
    assert (await guarded.put("/v1/agents/alpha/heartbeat")).status_code == 401
    assert (await guarded.delete("/v1/agents/alpha", headers=bearer("x"))).status_code == 403
    assert (
        await guarded.put("/v1/agents/alpha/heartbeat", headers=bearer(TOKEN))
    ).status_code == 200
    assert (await guarded.delete("/v1/agents/alpha", headers=bearer(TOKEN))).status_code == 204


async def test_reads_are_open_by_default(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/v1/agents")).status_code == 200
    assert (await guarded.get("/v1/agents/x")).status_code == 404


async def test_reads_need_a_token_when_required(make_client) -> None:
    async with make_client(token=TOKEN, read_token=READ_TOKEN, read_token_required=True) as client:
        assert (await client.get("/v1/agents")).status_code == 401
        assert (await client.get("/v1/agents", headers=bearer("nope"))).status_code == 403
        assert (await client.get("/v1/agents", headers=bearer(READ_TOKEN))).status_code == 200
        assert (await client.get("/v1/agents", headers=bearer(TOKEN))).status_code == 200
        assert (await client.post("/a2a", json={})).status_code == 401
        for public in ("/healthz", "/v1/openapi.json", "/.well-known/agent-card.json"):
            assert (await client.get(public)).status_code == 200, public


async def test_read_token_does_not_allow_writes(make_client, card_server) -> None:
    url = card_server.put_card("/a.json", "Alpha")
    async with make_client(token=TOKEN, read_token=READ_TOKEN, read_token_required=True) as client:
        response = await client.post(
            "/v1/agents", json={"card_url": url}, headers=bearer(READ_TOKEN)
        )
        assert response.status_code == 403


async def test_required_reads_need_a_configured_token() -> None:
    with pytest.raises(pydantic.ValidationError):
        RegistrySettings(read_token_required=True)


async def test_tokens_never_reach_the_logs(
    make_client, card_server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = card_server.put_card("/a.json", "Alpha")
    async with make_client(token=TOKEN) as client:
        await client.post("/v1/agents", json={"card_url": url}, headers=bearer("wrong-guess-789"))
        await client.post("/v1/agents", json={"card_url": url}, headers=bearer(TOKEN))
    assert TOKEN not in caplog.text
    assert "wrong-guess-789" not in caplog.text
    assert TOKEN not in repr(RegistrySettings(token=TOKEN))
