"""The REST API under ``/v1`` (plus ``/healthz``): thin handlers over :class:`Registry`."""

from __future__ import annotations

import json
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from node.registry.errors import BadRequest
from node.registry.openapi import openapi_document
from node.registry.records import AgentRecord, record_json
from node.registry.service import DEFAULT_PAGE_SIZE, Query, Registry


def api_routes(registry: Registry) -> list[Route]:
    """The registry's REST routes; every one is described by :func:`openapi_document`."""
    document = openapi_document(registry.settings)

    def entry(record: AgentRecord, *, with_card: bool) -> dict[str, Any]:
        return record_json(
            record,
            healthy=registry.is_healthy(record),
            expires_at=registry.expires_at(record),
            with_card=with_card,
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "agents": len(registry)})

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def register(request: Request) -> Response:
        body = await _json_object(request)
        if "card_url" not in body:
            raise BadRequest("body must contain card_url")
        record, created = await registry.register(body["card_url"])
        return JSONResponse(entry(record, with_card=True), status_code=201 if created else 200)

    async def list_agents(request: Request) -> Response:
        await registry.maybe_sweep()
        params = request.query_params
        page = registry.search(
            Query(
                skill=params.get("skill") or None,
                tag=params.get("tag") or None,
                q=params.get("q") or None,
                healthy=_bool(params, "healthy"),
                page_size=_int(params, "page_size", DEFAULT_PAGE_SIZE),
                page_token=params.get("page_token") or None,
            )
        )
        with_card = bool(_bool(params, "include_card"))
        return JSONResponse(
            {
                "agents": [entry(r, with_card=with_card) for r in page.agents],
                "next_page_token": page.next_page_token,
            }
        )

    async def get_agent(request: Request) -> Response:
        await registry.maybe_sweep()
        return JSONResponse(entry(registry.get(request.path_params["id"]), with_card=True))

    async def delete_agent(request: Request) -> Response:
        await registry.deregister(request.path_params["id"])
        return Response(status_code=204)

    async def heartbeat(request: Request) -> Response:
        record = await registry.heartbeat(request.path_params["id"])
        return JSONResponse(entry(record, with_card=False))

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/openapi.json", openapi, methods=["GET"]),
        Route("/v1/agents", register, methods=["POST"]),
        Route("/v1/agents", list_agents, methods=["GET"]),
        Route("/v1/agents/{id}", get_agent, methods=["GET"]),
        Route("/v1/agents/{id}", delete_agent, methods=["DELETE"]),
        Route("/v1/agents/{id}/heartbeat", heartbeat, methods=["PUT"]),
    ]


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def _bool(params: QueryParams, name: str) -> bool | None:
    value = params.get(name)
    if value in (None, ""):
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise BadRequest(f"{name} must be true or false")


def _int(params: QueryParams, name: str, default: int) -> int:
    value = params.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise BadRequest(f"{name} must be an integer") from exc
