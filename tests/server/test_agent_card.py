"""The served agent card: interfaces, skills with input schemas, caching headers."""

from __future__ import annotations

import httpx
from a2a.client import A2ACardResolver

from node import protocol

CARD_PATH = "/.well-known/agent-card.json"


async def test_card_lists_interfaces_and_one_skill_per_public_tool(node_url, http):
    card = await A2ACardResolver(http, node_url).get_agent_card()
    bindings = {i.protocol_binding: i.url for i in card.supported_interfaces}
    assert bindings == {"JSONRPC": f"{node_url}/", "HTTP+JSON": f"{node_url}/rest"}
    # A2A 0.3 beside 1.0 by default (tests/server/test_v0_3.py): each binding at both versions
    assert sorted((i.protocol_binding, i.protocol_version) for i in card.supported_interfaces) == [
        ("HTTP+JSON", "0.3"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("JSONRPC", "1.0"),
    ]
    assert card.capabilities.streaming
    skills = {s.id for s in card.skills}
    assert {"calculate", "text_stats", "json_query", "slow", "admin_only"} <= skills
    assert "secret_helper" not in skills


async def test_card_publishes_each_skills_input_schema_through_an_extension(node_url, http):
    body = (await http.get(node_url + CARD_PATH)).json()
    (ext,) = [e for e in body["capabilities"]["extensions"] if e["uri"] == protocol.SKILL_SCHEMAS]
    assert ext["params"]["agent_id"] == "test-node"
    schema = ext["params"]["schemas"]["calculate"]
    assert schema["type"] == "object" and schema["required"] == ["expression"]


async def test_card_is_cacheable_with_etag_and_last_modified(node_url, http):
    first = await http.get(node_url + CARD_PATH)
    assert first.status_code == 200
    assert "max-age" in first.headers["cache-control"]
    assert first.headers["last-modified"].endswith("GMT")
    again = await http.get(node_url + CARD_PATH, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304


async def test_public_url_is_what_the_card_advertises(tmp_path):
    from node.card import parse_card
    from node.server.app import build_node_app

    card = parse_card({"id": "p", "name": "P", "description": "d", "tools": ["calculate"]}, env={})
    app = build_node_app(card, public_url="https://node.example.test/base", data_dir=tmp_path)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        body = (await client.get(CARD_PATH)).json()
    urls = [i["url"] for i in body["supportedInterfaces"]]
    assert urls == ["https://node.example.test/base/", "https://node.example.test/base/rest"] * 2
    assert body["url"] == "https://node.example.test/base/"  # the 0.3 field


async def test_cached_card_route_answers_as_the_sdk_route_byte_for_byte_as_the_card_changes():
    """The serialized card is cached per content; every answer equals the SDK endpoint's."""
    from a2a.server.routes import create_agent_card_routes
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    from node.server.card_route import agent_card_route

    def make(skills: list[str]) -> AgentCard:
        return AgentCard(
            name="n",
            description="d",
            version="1",
            supported_interfaces=[AgentInterface(url="http://n/", protocol_binding="JSONRPC")],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["application/json"],
            default_output_modes=["application/json"],
            skills=[AgentSkill(id=s, name=s, description=s, tags=["t"]) for s in skills],
        )

    now = [make(["a"])]

    async def modifier(_: AgentCard) -> AgentCard:
        return now[0]

    ours = Starlette(routes=[agent_card_route(now[0], modifier, 60)])
    sdk = Starlette(
        routes=create_agent_card_routes(
            now[0], card_modifier=modifier, cache_control="public, max-age=60"
        )
    )

    def same(a: httpx.Response, b: httpx.Response) -> str:
        assert a.status_code == b.status_code and a.content == b.content
        theirs = [(k, v) for k, v in b.headers.multi_items()]
        assert [(k, v) for k, v in a.headers.multi_items() if k != "last-modified"] == theirs
        return a.headers["last-modified"]

    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=ours), base_url="http://x") as c1,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=sdk), base_url="http://x") as c2,
    ):
        etags = []
        for skills in (["a"], ["a"], ["a", "b"], ["a", "b"], ["a"], []):
            now[0] = make(skills)  # a new object each time: only the content keys the cache
            first = same(await c1.get(CARD_PATH), await c2.get(CARD_PATH))
            etag = (await c2.get(CARD_PATH)).headers["etag"]
            etags.append(etag)
            for match in (etag, f'"{etag[2:]}"', f'"x", {etag}', "*", '"other"'):
                headers = {"If-None-Match": match}
                assert (
                    same(
                        await c1.get(CARD_PATH, headers=headers),
                        await c2.get(CARD_PATH, headers=headers),
                    )
                    == first
                )
        assert len(set(etags)) == 3 and etags[0] == etags[1] == etags[4] != etags[2]
