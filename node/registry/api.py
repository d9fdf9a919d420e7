"""The REST API under ``/v1`` (plus ``/healthz``): thin handlers over :class:`Registry`.

Everything a client sends is checked here before the registry sees it: bodies must be declared
``application/json`` (or not declared) and be JSON under :mod:`node.registry.safejson`'s rules;
query parameters must be known, given once, and within :data:`MAX_QUERY_CHARS` /
:data:`MAX_TOKEN_CHARS`; path ids must match the agent id pattern. Listings render each entry
on its own, so an entry that cannot be rendered is set aside (and counted), not a failed page.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from node.errors import RegistryError
from node.observability.metrics import RegistryMetrics
from node.registry import safejson
from node.registry.bulk import import_body
from node.registry.conditional import conditional_response
from node.registry.errors import BadRequest, UnreadableEntry, UnsupportedMediaType
from node.registry.federation import HOP_HEADER, Federation
from node.registry.openapi import openapi_document
from node.registry.records import RENDER_ERRORS, AgentRecord, EntryRenderer
from node.registry.service import (
    DEFAULT_PAGE_SIZE,
    MAX_QUERY_CHARS,
    MAX_TOKEN_CHARS,
    Query,
    Registry,
    check_agent_id,
)

log = logging.getLogger(__name__)

_IMPORTED = {"registered": "created", "unchanged": "updated", "error": "refused"}
LIST_PARAMS = ("skill", "tag", "q", "healthy", "page_size", "page_token", "include_card", "scope")
_JSON = "application/json"


def api_routes(
    registry: Registry, federation: Federation, metrics: RegistryMetrics | None = None
) -> list[Route]:
    """The registry's REST routes; every one is described by :func:`openapi_document`.

    Listings are completed by ``federation``'s upstreams (:mod:`node.registry.federation`) and
    answer conditional GETs (:mod:`node.registry.conditional`); ``metrics`` counts registrations
    and heartbeats.
    """
    document = openapi_document(registry.settings)
    renderer = EntryRenderer()  # entries' fixed parts rendered once (bounded)

    async def render(record: AgentRecord, *, with_card: bool) -> bytes | None:
        """The entry's JSON, or ``None`` (and the entry set aside) when it cannot be rendered."""
        try:
            return renderer.render(
                record,
                healthy=registry.is_healthy(record),
                expires_at=registry.expires_at(record),
                with_card=with_card,
            )
        except RENDER_ERRORS as exc:
            await registry.set_aside(record.id, f"cannot be rendered ({type(exc).__name__})")
            return None

    async def one(record: AgentRecord, status_code: int = 200) -> Response:
        body = await render(record, with_card=True)
        if body is None:
            raise UnreadableEntry(f"the stored entry {record.id!r} cannot be rendered")
        return Response(body, status_code=status_code, media_type=_JSON)

    async def healthz(request: Request) -> Response:
        agents, unreadable = await registry.counts()
        return JSONResponse({"status": "ok", "agents": agents, "unreadable": unreadable})

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def register(request: Request) -> Response:
        body = await _json_object(request)
        if "card_url" not in body:
            raise BadRequest("body must contain card_url")
        try:
            record, created = await registry.register(body["card_url"])
        except RegistryError:
            if metrics is not None:
                metrics.registration("refused")
            raise
        if metrics is not None:
            metrics.registration("created" if created else "updated")
        return await one(record, 201 if created else 200)

    async def list_agents(request: Request) -> Response:
        params = _list_params(request.query_params)
        token = params.get("page_token") or None
        offset = federation.tail_offset(token)  # a fed.<n> token pages the federated tail
        scope = federation.check_scope(params.get("scope"))
        query = Query(
            skill=params.get("skill") or None,
            tag=params.get("tag") or None,
            q=params.get("q") or None,
            healthy=_bool(params, "healthy"),
            page_size=_int(params, "page_size", DEFAULT_PAGE_SIZE),
            page_token=None if offset is not None else token,
            include_card=bool(_bool(params, "include_card")),
        )
        with_card = query.include_card
        await registry.maybe_sweep()
        entries: list[bytes] = []
        next_token: str | None = None
        card_urls: set[str] = set()
        if offset is None:
            page = await registry.search(query)
            entries = [e for r in page.agents if (e := await render(r, with_card=with_card))]
            next_token, card_urls = page.next_page_token, {r.card_url for r in page.agents}
        report = b""
        if federation.wanted(
            scope,
            offset=offset,
            local=len(entries),
            next_token=next_token,
            page_size=query.page_size,
        ):
            tail = await federation.tail(
                {k: v for k, v in params.items() if k not in ("page_size", "page_token")},
                hop_header=request.headers.get(HOP_HEADER),
                free=query.page_size - len(entries),
                offset=offset or 0,
                listed_here=registry.listed,  # an upstream copy of these is left out
                local_card_urls=card_urls,
            )
            entries += tail.entries
            next_token, report = tail.next_page_token, b',"federation":' + tail.report
        body = b"".join(
            (
                b'{"agents":[',
                b",".join(entries),
                b'],"next_page_token":',
                safejson.dumps(next_token),
                b',"unreadable":',
                str(await registry.unreadable()).encode(),
                report,
                b"}",
            )
        )
        return conditional_response(request, body, _JSON)

    async def get_agent(request: Request) -> Response:
        agent_id = check_agent_id(request.path_params["id"])
        await registry.maybe_sweep()
        return await one(await registry.get(agent_id))

    async def delete_agent(request: Request) -> Response:
        await registry.deregister(check_agent_id(request.path_params["id"]))
        return Response(status_code=204)

    async def heartbeat(request: Request) -> Response:
        record = await registry.heartbeat(check_agent_id(request.path_params["id"]))
        if metrics is not None:
            metrics.heartbeat()
        body = await render(record, with_card=False)
        if body is None:
            raise UnreadableEntry(f"the stored entry {record.id!r} cannot be rendered")
        return Response(body, media_type=_JSON)

    async def import_agents(request: Request) -> Response:
        urls = (await _json_object(request)).get("card_urls")
        if not isinstance(urls, list) or not urls:
            raise BadRequest("body must contain card_urls, a non-empty list of card URLs")
        if len(urls) > (limit := registry.settings.import_max_urls):
            raise BadRequest(f"card_urls has {len(urls)} entries; at most {limit} per request")
        outcomes = await registry.register_many(urls)
        if metrics is not None:  # each URL: registered (written), unchanged, error
            for outcome in outcomes:
                metrics.registration(_IMPORTED[outcome.status])
        return JSONResponse(import_body(outcomes))

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v1/openapi.json", openapi, methods=["GET"]),
        Route("/v1/agents", register, methods=["POST"]),
        Route("/v1/agents:import", import_agents, methods=["POST"]),
        Route("/v1/agents", list_agents, methods=["GET"]),
        Route("/v1/agents/{id}", get_agent, methods=["GET"]),
        Route("/v1/agents/{id}", delete_agent, methods=["DELETE"]),
        Route("/v1/agents/{id}/heartbeat", heartbeat, methods=["PUT"]),
    ]


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()  # bounded by the body-limit middleware (413 first)
    content_type = request.headers.get("content-type")
    if content_type is not None:
        media_type, *parameters = (p.strip().lower() for p in content_type.split(";"))
        if media_type != _JSON and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise UnsupportedMediaType(
                f"the body must be application/json, not {media_type[:100]!r}"
            )
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip() == "charset" and value.strip().strip('"') not in ("utf-8", "utf8"):
                raise UnsupportedMediaType("JSON bodies are UTF-8 (charset=utf-8 or no charset)")
    try:
        body = safejson.loads(raw)
    except safejson.UnsafeJson as exc:
        raise BadRequest(f"body is not JSON the registry accepts: {exc}") from exc
    if not isinstance(body, dict):
        raise BadRequest("body must be a JSON object")
    return body


def _list_params(params: QueryParams) -> dict[str, str]:
    """The listing's query parameters: known names, each at most once, within the limits."""
    out: dict[str, str] = {}
    for name, value in params.multi_items():
        if name not in LIST_PARAMS:
            raise BadRequest(
                f"unknown query parameter {name[:100]!r}; expected one of {list(LIST_PARAMS)}"
            )
        if name in out:
            raise BadRequest(f"query parameter {name!r} is given more than once")
        limit = MAX_TOKEN_CHARS if name == "page_token" else MAX_QUERY_CHARS
        if len(value) > limit:
            raise BadRequest(f"{name} is longer than {limit} characters")
        out[name] = value
    return out


def _bool(params: dict[str, str], name: str) -> bool | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise BadRequest(f"{name} must be true or false")


def _int(params: dict[str, str], name: str, default: int) -> int:
    value = params.get(name)
    if value is None or value == "":
        return default
    if not value.isascii() or not value.strip().lstrip("+-").isdigit():
        raise BadRequest(f"{name} must be an integer")
    return int(value)
