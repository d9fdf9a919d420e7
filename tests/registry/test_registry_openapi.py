"""The OpenAPI document describes every route, and real responses match its schemas."""

from __future__ import annotations

from typing import Any

import fastjsonschema
import httpx
from starlette.routing import Route

from node.registry import RegistrySettings, build_registry_app
from node.registry.openapi import openapi_document


def schema_validator(document: dict[str, Any], name: str) -> Any:
    return fastjsonschema.compile(
        {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    )


def test_every_route_is_described_and_every_description_is_a_route() -> None:
    settings = RegistrySettings(db="unused.db", token="t")
    app = build_registry_app(settings)
    document = openapi_document(settings)
    served = {
        (route.path, method.lower())
        for route in app.routes
        if isinstance(route, Route) and not route.path.startswith("/a2a")
        for method in (route.methods or ())
        if method != "HEAD"
    }
    described = {
        (path, method)
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete", "patch")
    }
    assert served == described


async def test_document_is_served_and_is_openapi_3_1(client: httpx.AsyncClient) -> None:
    document = (await client.get("/v1/openapi.json")).json()
    assert document["openapi"].startswith("3.1")
    assert "/v1/agents/{id}/heartbeat" in document["paths"]


async def test_responses_match_the_documented_schemas(
    client: httpx.AsyncClient, card_server
) -> None:
    document = (await client.get("/v1/openapi.json")).json()
    url = card_server.put_card("/a.json", "Alpha", skills=[card_server.skill("s", "t")])
    schema_validator(document, "Agent")(
        (await client.post("/v1/agents", json={"card_url": url})).json()
    )
    schema_validator(document, "Agent")((await client.get("/v1/agents/alpha")).json())
    schema_validator(document, "Agent")((await client.put("/v1/agents/alpha/heartbeat")).json())
    listing = (await client.get("/v1/agents", params={"page_size": 1, "include_card": "1"})).json()
    schema_validator(document, "AgentList")(listing)
    schema_validator(document, "Error")((await client.get("/v1/agents/none")).json())
    schema_validator(document, "Health")((await client.get("/healthz")).json())
