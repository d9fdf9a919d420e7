"""Every bad input gets a clear 4xx JSON error, and nothing is stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from node.errors import RegistryError
from node.registry import errors


async def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]


async def assert_empty(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/agents")).json()["agents"] == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "bad_request"),
        (b"[1, 2]", "bad_request"),
        (b"{}", "bad_request"),
        (b'{"card_url": 123}', "invalid_url"),
        (b'{"card_url": ""}', "invalid_url"),
        (b'{"card_url": "ftp://127.0.0.1/card.json"}', "invalid_url"),
        (b'{"card_url": "file:///etc/passwd"}', "invalid_url"),
        (b'{"card_url": "/relative/card.json"}', "invalid_url"),
        (b'{"card_url": "http://user:pw@127.0.0.1/card.json"}', "invalid_url"),
    ],
)
async def test_bad_register_bodies_are_400(
    client: httpx.AsyncClient, body: bytes, code: str
) -> None:
    response = await client.post(
        "/v1/agents", content=body, headers={"content-type": "application/json"}
    )
    await assert_error(response, 400, code)
    await assert_empty(client)


async def test_unreachable_card_url(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/agents", json={"card_url": "http://127.0.0.1:1/card.json"})
    await assert_error(response, 422, "card_unreachable")
    await assert_empty(client)


async def test_card_url_answering_404(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.base_url + "/missing.json"
    response = await client.post("/v1/agents", json={"card_url": url})
    await assert_error(response, 422, "card_unreachable")
    assert "404" in response.json()["error"]["message"]


def _without(key: str) -> Any:
    def build(card_server: Any) -> Any:
        card = card_server.card("Broken")
        del card[key]
        return card

    return build


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (lambda cs: b"<html>not json</html>", "not JSON"),
        (lambda cs: [1, 2], "JSON object"),
        (lambda cs: {**cs.card("X"), "name": 42}, "AgentCard"),
        (lambda cs: {**cs.card("X"), "skills": "none"}, "AgentCard"),
        (lambda cs: {**cs.card("X"), "name": "  "}, "name"),
        (_without("name"), "name"),
        (_without("supportedInterfaces"), "supportedInterfaces"),
        (
            lambda cs: {**cs.card("X"), "supportedInterfaces": [{"protocolBinding": "JSONRPC"}]},
            "url",
        ),
        (_without("skills"), "skills"),
        (lambda cs: cs.card("X", agent_id="a/b"), "agent_id"),
        (lambda cs: cs.card("X", agent_id="Big.Agent"), "agent_id"),  # no node can have this id
    ],
)
async def test_invalid_cards_are_422(
    client: httpx.AsyncClient, card_server, document: Any, reason: str
) -> None:
    url = card_server.put("/card.json", document(card_server))
    response = await client.post("/v1/agents", json={"card_url": url})
    await assert_error(response, 422, "invalid_card")
    assert reason in response.json()["error"]["message"]
    await assert_empty(client)


async def test_a_card_with_no_skills_is_accepted(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put_card("/card.json", "Quiet", skills=[])
    assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 201


async def test_private_address_is_refused_unless_allowed(make_client, card_server) -> None:
    url = card_server.put_card("/card.json", "Local")
    async with make_client(allow_cidrs=()) as client:
        response = await client.post("/v1/agents", json={"card_url": url})
        await assert_error(response, 422, "url_refused")
        await assert_empty(client)


async def test_oversized_card_is_refused(make_client, card_server) -> None:
    url = card_server.put_card("/card.json", "Big", description="x" * 5000)
    async with make_client(max_card_bytes=2000) as client:
        response = await client.post("/v1/agents", json={"card_url": url})
        await assert_error(response, 422, "card_too_large")
        await assert_empty(client)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/agents/nobody"),
        ("DELETE", "/v1/agents/nobody"),
        ("PUT", "/v1/agents/nobody/heartbeat"),
    ],
)
async def test_unknown_id_is_404(client: httpx.AsyncClient, method: str, path: str) -> None:
    await assert_error(await client.request(method, path), 404, "not_found")


async def test_body_over_one_mib_is_413(client: httpx.AsyncClient) -> None:
    body = b'{"card_url": "' + b"x" * (1024 * 1024) + b'"}'
    response = await client.post("/v1/agents", content=body)
    await assert_error(response, 413, "body_too_large")


async def test_streamed_body_over_one_mib_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" " * 65536

    response = await client.post("/v1/agents", content=chunks())
    await assert_error(response, 413, "body_too_large")


async def test_a2a_endpoint_has_the_body_limit_too(client: httpx.AsyncClient) -> None:
    response = await client.post("/a2a", content=b" " * (2 * 1024 * 1024))
    assert response.status_code == 413


def test_every_registry_error_has_a_status() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, RegistryError)
    ]
    assert set(classes) <= set(errors.ERROR_TABLE)
    for cls in classes:
        status, code = errors.ERROR_TABLE[cls]
        assert code
        assert 400 <= status < 500 or cls in (RegistryError, errors.Busy)  # Busy: 503


def _v0_3_card(url: str) -> dict[str, Any]:
    """A card as an a2a-sdk 0.3 server serves it: ``url``, no ``supportedInterfaces``."""
    return {
        "name": "Legacy",
        "description": "an a2a-sdk 0.3 agent",
        "url": url,
        "version": "1.0.0",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "says it back", "tags": ["echo"]}],
    }


async def test_an_a2a_0_3_card_registers(client: httpx.AsyncClient, card_server) -> None:
    url = card_server.put("/legacy.json", _v0_3_card("http://127.0.0.1:9/"))
    response = await client.post("/v1/agents", json={"card_url": url})
    assert response.status_code == 201, response.text
    found = (await client.get("/v1/agents", params={"skill": "echo"})).json()
    assert [a["name"] for a in found["agents"]] == ["Legacy"]


async def test_an_invalid_a2a_0_3_card_is_422_naming_the_field(
    client: httpx.AsyncClient, card_server
) -> None:
    card = _v0_3_card("http://127.0.0.1:9/")
    del card["version"]
    url = card_server.put("/legacy.json", card)
    response = await client.post("/v1/agents", json={"card_url": url})
    await assert_error(response, 422, "invalid_card")
    assert "version" in response.json()["error"]["message"]
    await assert_empty(client)
