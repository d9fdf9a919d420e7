"""The registry as an A2A agent: its card (skill ``find_agents``) and the executor behind it.

A data part ``{"skill": "find_agents", "arguments": {"skill"?, "tag"?, "q"?, "healthy"?,
"limit"?, "page_token"?, "scope"?}}`` or a text part (used as ``q``) is answered with ONE agent
message (no task: the lookup is instant and stateless, so nothing is kept in the task store). Its
parts are a data part and a short text summary. The data part is either
``{"agents": [{id, name, card_url, skills, healthy}, ...], "next_page_token": ...}`` or, for
invalid arguments, the REST API's error body ``{"error": {"code": "bad_request", "message": ...}}``.

Federated as ``GET /v1/agents`` is (:mod:`node.registry.federation`): a short last page, or any
last page with ``scope: "federated"``, is completed by the upstream registries, their agents
marked ``"registry"`` and the page's data part carrying ``"federation"`` (how each upstream
fared); ``scope: "local"`` stays home. The hop state of a forwarded message (its metadata, as
between nodes) bounds the forwarding.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from node.protocol import HOP
from node.registry import safejson
from node.registry.errors import BadRequest, error_body, status_and_code
from node.registry.federation import Federation
from node.registry.records import RENDER_ERRORS
from node.registry.service import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Query, Registry
from node.registry.settings import RegistrySettings
from node.server.grpc_binding import grpc_address, grpc_interfaces
from node.server.v0_3 import add_v0_3_interfaces

log = logging.getLogger(__name__)

SKILL_ID = "find_agents"
REGISTRY_VERSION = "0.1.0"
A2A_PATH = "/a2a"
A2A_REST_PATH = "/a2a/rest"
_TEXT_ARGS = ("skill", "tag", "q", "page_token", "scope")
_ENTRY_FIELDS = ("id", "name", "card_url", "skills", "healthy", "registry")


@dataclass(frozen=True, slots=True)
class FindRequest:
    """One ``find_agents`` call: the local search, and how far it may federate."""

    query: Query
    scope: str | None = None  # "local" | "federated" | None (federate a short last page)


def registry_card(settings: RegistrySettings, grpc_port: int | None = None) -> AgentCard:
    """The registry's own agent card, published at ``/.well-known/agent-card.json``.

    ``grpc_port``: the port its gRPC binding is bound to, if it serves one.
    """
    base = settings.base_url
    card = AgentCard(
        name="a2a-node registry",
        description="Directory of the agents on this network: find agents by skill, tag or text.",
        version=REGISTRY_VERSION,
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=base + A2A_PATH, protocol_version="1.0"),
            AgentInterface(
                protocol_binding="HTTP+JSON", url=base + A2A_REST_PATH, protocol_version="1.0"
            ),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["application/json"],
        skills=[
            AgentSkill(
                id=SKILL_ID,
                name="Find agents",
                description=(
                    "List registered agents matching a skill id, a tag and/or free text; "
                    'send {"skill": "find_agents", "arguments": {"skill": ..., "tag": ..., '
                    '"q": ..., "healthy": true, "limit": 50}} or plain text (searched as q); '
                    'a short page is completed by upstream registries ("scope": "local" or '
                    '"federated" to choose).'
                ),
                tags=["registry", "discovery"],
                examples=["translation", '{"skill": "find_agents", "arguments": {"tag": "math"}}'],
            )
        ],
    )
    if grpc_port is not None:
        address = grpc_address(base, grpc_port)
        card.supported_interfaces.extend(grpc_interfaces(address, v0_3=settings.a2a_v0_3))
    if settings.read_token_required:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    if settings.a2a_v0_3:
        add_v0_3_interfaces(card)
    return card


def parse_request(message: Message) -> FindRequest:
    """Turn a message into a :class:`FindRequest` (raises :class:`BadRequest`)."""
    data = [d for d in get_data_parts(message.parts) if isinstance(d, dict)]
    if not data:
        return FindRequest(Query(q=get_message_text(message).strip() or None))
    request = data[0]
    if request.get("skill", SKILL_ID) != SKILL_ID:
        raise BadRequest(f"unknown skill {request.get('skill')!r}; this agent offers {SKILL_ID!r}")
    args = request.get("arguments", {})
    if not isinstance(args, dict):
        raise BadRequest("arguments must be an object")
    unknown = set(args) - {*_TEXT_ARGS, "healthy", "limit"}
    if unknown:
        raise BadRequest(
            f"unknown arguments {sorted(unknown)}; expected {[*_TEXT_ARGS, 'healthy', 'limit']}"
        )
    for name in _TEXT_ARGS:
        if args.get(name) is not None and not isinstance(args[name], str):
            raise BadRequest(f"{name} must be a string")
    healthy = args.get("healthy")
    if healthy is not None and not isinstance(healthy, bool):
        raise BadRequest("healthy must be true or false")
    limit = args.get("limit", DEFAULT_PAGE_SIZE)
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int | float)
        or (isinstance(limit, float) and not limit.is_integer())
    ):
        raise BadRequest(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}")
    query = Query(
        skill=args.get("skill") or None,
        tag=args.get("tag") or None,
        q=args.get("q") or None,
        healthy=healthy,
        page_size=int(limit),
        page_token=args.get("page_token") or None,
    )
    return FindRequest(query, Federation.check_scope(args.get("scope")))


class FindAgentsExecutor(AgentExecutor):
    """Answers ``find_agents`` from the registry's search with one agent message; ``federation``
    (the one ``GET /v1/agents`` uses) completes short pages from upstream registries."""

    def __init__(self, registry: Registry, federation: Federation | None = None) -> None:
        self.registry = registry
        self.federation = federation

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.message is None:
            return
        try:
            message = context.message
            metadata = MessageToDict(message.metadata) if message.HasField("metadata") else {}
            hop_header = json.dumps(metadata[HOP]) if HOP in metadata else None
            result, summary = await self._find(parse_request(message), hop_header)
        except BadRequest as exc:
            result = error_body(status_and_code(exc)[1], str(exc))
            summary = f"bad request: {exc}"
        reply = Message(
            message_id=uuid4().hex,
            context_id=context.context_id or "",
            role=Role.ROLE_AGENT,
            parts=[new_data_part(result), new_text_part(summary)],
        )
        await event_queue.enqueue_event(reply)

    async def _find(
        self, request: FindRequest, hop_header: str | None = None
    ) -> tuple[dict[str, Any], str]:
        query = request.query
        offset = Federation.tail_offset(query.page_token)  # fed.<n>: the federated tail's page
        agents: list[dict[str, Any]] = []
        next_token: str | None = None
        if offset is None:
            agents, next_token = await self._local(query)
        result: dict[str, Any] = {}
        federation = self.federation
        if federation is not None and federation.wanted(
            request.scope,
            offset=offset,
            local=len(agents),
            next_token=next_token,
            page_size=query.page_size,
        ):
            filters = {"skill": query.skill, "tag": query.tag, "q": query.q, "scope": request.scope}
            if query.healthy is not None:
                filters["healthy"] = "true" if query.healthy else "false"
            tail = await federation.tail(
                {k: v for k, v in filters.items() if v},
                hop_header=hop_header,
                free=query.page_size - len(agents),
                offset=offset or 0,
                listed_here=self.registry.listed,
                local_card_urls={a["card_url"] for a in agents},
            )
            for raw in tail.entries:
                entry = json.loads(raw)
                agents.append({k: entry[k] for k in _ENTRY_FIELDS if k in entry})
            next_token, result["federation"] = tail.next_page_token, json.loads(tail.report)
        more = "; more with next_page_token" if next_token else ""
        summary = f"found {len(agents)} agent{'' if len(agents) == 1 else 's'}{more}"
        return {"agents": agents, "next_page_token": next_token, **result}, summary

    async def _local(self, query: Query) -> tuple[list[dict[str, Any]], str | None]:
        """One page of this registry's own agents, and its next page token."""
        page = await self.registry.search(query)
        agents = []
        for r in page.agents:
            agent = {
                "id": r.id,
                "name": r.name,
                "card_url": r.card_url,
                "skills": [s.to_json() for s in r.skills],
                "healthy": self.registry.is_healthy(r),
            }
            try:
                safejson.dumps(agent)
            except RENDER_ERRORS as exc:  # one bad entry must not fail the answer
                await self.registry.set_aside(r.id, f"cannot be rendered ({type(exc).__name__})")
                continue
            agents.append(agent)
        return agents, page.next_page_token

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="find_agents answers at once; nothing to cancel")
