"""The registry as an A2A agent: its card (skill ``find_agents``) and the executor behind it.

A data part ``{"skill": "find_agents", "arguments": {"skill"?, "tag"?, "q"?, "healthy"?,
"limit"?, "page_token"?}}`` or a text part (used as ``q``) yields a completed task with one data
artifact ``{"agents": [{id, name, card_url, skills, healthy}, ...], "next_page_token": ...}``.
"""

from __future__ import annotations

import logging

from a2a.helpers import get_data_parts, get_message_text, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from node.registry.errors import BadRequest
from node.registry.service import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, Query, Registry
from node.registry.settings import RegistrySettings

log = logging.getLogger(__name__)

SKILL_ID = "find_agents"
REGISTRY_VERSION = "0.1.0"
A2A_PATH = "/a2a"
A2A_REST_PATH = "/a2a/rest"
_TEXT_ARGS = ("skill", "tag", "q", "page_token")


def registry_card(settings: RegistrySettings) -> AgentCard:
    """The registry's own agent card, published at ``/.well-known/agent-card.json``."""
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
                    '"q": ..., "healthy": true, "limit": 50}} or plain text (searched as q).'
                ),
                tags=["registry", "discovery"],
                examples=["translation", '{"skill": "find_agents", "arguments": {"tag": "math"}}'],
            )
        ],
    )
    if settings.read_token_required:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def parse_request(message: Message) -> Query:
    """Turn a message into a search :class:`Query` (raises :class:`BadRequest`)."""
    data = [d for d in get_data_parts(message.parts) if isinstance(d, dict)]
    if not data:
        return Query(q=get_message_text(message).strip() or None)
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
    if isinstance(limit, bool) or not isinstance(limit, int | float) or limit != int(limit):
        raise BadRequest(f"limit must be an integer from 1 to {MAX_PAGE_SIZE}")
    return Query(
        skill=args.get("skill") or None,
        tag=args.get("tag") or None,
        q=args.get("q") or None,
        healthy=healthy,
        page_size=int(limit),
        page_token=args.get("page_token") or None,
    )


class FindAgentsExecutor(AgentExecutor):
    """Answers ``find_agents`` from the registry's in-memory index."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is None:
            return
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            page = self.registry.search(parse_request(message))
        except BadRequest as exc:
            await updater.reject(updater.new_agent_message([Part(text=str(exc))]))
            return
        agents = [
            {
                "id": r.id,
                "name": r.name,
                "card_url": r.card_url,
                "skills": [s.to_json() for s in r.skills],
                "healthy": self.registry.is_healthy(r),
            }
            for r in page.agents
        ]
        result = {"agents": agents, "next_page_token": page.next_page_token}
        await updater.add_artifact([new_data_part(result)], name="agents")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()
