"""Searching the registry: filters, text, health and cursor pagination."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
async def populated(client: httpx.AsyncClient, card_server) -> httpx.AsyncClient:
    s = card_server.skill
    agents = {
        "Translator": [
            s("translate", "language", "text", description="Translates between languages")
        ],
        "Calculator": [s("add", "math"), s("multiply", "math")],
        "Summariser": [s("summarise", "text", name="Summarise", description="Shortens long text")],
        "Weather": [s("forecast", "weather", description="Forecast for a city")],
        "adder": [s("add", "math", description="Adds numbers quickly")],
    }
    for name, skills in agents.items():
        url = card_server.put_card(f"/{name}.json", name, skills=skills)
        assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 201
    return client


async def ids(client: httpx.AsyncClient, **params: str) -> list[str]:
    response = await client.get("/v1/agents", params=params)
    assert response.status_code == 200, response.text
    return [a["id"] for a in response.json()["agents"]]


async def test_lists_all_in_name_order(populated: httpx.AsyncClient) -> None:
    assert await ids(populated) == ["adder", "calculator", "summariser", "translator", "weather"]


async def test_filter_by_skill_id(populated: httpx.AsyncClient) -> None:
    assert await ids(populated, skill="add") == ["adder", "calculator"]
    assert await ids(populated, skill="nothing") == []


async def test_filter_by_tag_is_exact(populated: httpx.AsyncClient) -> None:
    assert await ids(populated, tag="text") == ["summariser", "translator"]
    assert await ids(populated, tag="tex") == []


async def test_free_text_is_case_insensitive_over_names_descriptions_and_tags(
    populated: httpx.AsyncClient,
) -> None:
    assert await ids(populated, q="WEATHER") == ["weather"]  # name and tag
    assert await ids(populated, q="numbers") == ["adder"]  # skill description
    assert await ids(populated, q="summarise") == ["summariser"]  # skill name
    assert await ids(populated, q="langu") == ["translator"]  # tag substring
    assert await ids(populated, q="zzz") == []


async def test_filters_combine(populated: httpx.AsyncClient) -> None:
    assert await ids(populated, skill="add", tag="math", q="quick") == ["adder"]
    assert await ids(populated, tag="text", q="language") == ["translator"]
    assert await ids(populated, skill="add", tag="text") == []


async def test_include_card_adds_cards_to_the_list(populated: httpx.AsyncClient) -> None:
    plain = (await populated.get("/v1/agents")).json()["agents"]
    assert all("card" not in a for a in plain)
    full = (await populated.get("/v1/agents", params={"include_card": "true"})).json()["agents"]
    assert all(a["card"]["name"] == a["name"] for a in full)


async def test_pagination_walks_every_result_once(client: httpx.AsyncClient, card_server) -> None:
    names = [f"Agent {i:02d}" for i in range(23)]
    for name in reversed(names):
        await client.post("/v1/agents", json={"card_url": card_server.put_card(f"/{name}", name)})
    seen: list[str] = []
    token: str | None = None
    pages = 0
    while True:
        params = {"page_size": "5", **({"page_token": token} if token else {})}
        body = (await client.get("/v1/agents", params=params)).json()
        seen += [a["name"] for a in body["agents"]]
        pages += 1
        token = body["next_page_token"]
        if token is None:
            break
    assert seen == names
    assert pages == 5


async def test_pagination_with_a_filter(populated: httpx.AsyncClient) -> None:
    first = (await populated.get("/v1/agents", params={"tag": "math", "page_size": 1})).json()
    assert [a["id"] for a in first["agents"]] == ["adder"]
    params = {"tag": "math", "page_size": 1, "page_token": first["next_page_token"]}
    second = (await populated.get("/v1/agents", params=params)).json()
    assert [a["id"] for a in second["agents"]] == ["calculator"]
    assert second["next_page_token"] is None


async def test_a_page_exactly_full_has_no_next_token(populated: httpx.AsyncClient) -> None:
    body = (await populated.get("/v1/agents", params={"page_size": 5})).json()
    assert len(body["agents"]) == 5
    assert body["next_page_token"] is None


@pytest.mark.parametrize(
    "params",
    [
        {"page_size": "0"},
        {"page_size": "201"},
        {"page_size": "ten"},
        {"page_token": "not-a-token!"},
        {"page_token": "WzFd"},  # base64 of [1]
        {"healthy": "maybe"},
    ],
)
async def test_bad_query_parameters_are_400(
    client: httpx.AsyncClient, params: dict[str, str]
) -> None:
    response = await client.get("/v1/agents", params=params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_request"


async def test_page_size_200_is_allowed(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/agents", params={"page_size": "200"})).status_code == 200
