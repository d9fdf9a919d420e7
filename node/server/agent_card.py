"""Build the served A2A :class:`AgentCard` from a :class:`NodeCard` and the node's public skills.

The card advertises JSON-RPC at the public URL and HTTP+JSON under ``/rest``, both at protocol 1.0,
one skill per public tool, and the :data:`node.protocol.SKILL_SCHEMAS` extension carrying each
skill's input schema and the node's agent id. Secrets never reach it: only scheme *names* are
published.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct

from node import protocol
from node.card import NodeCard
from node.server.grpc_binding import grpc_interfaces
from node.server.v0_3 import add_v0_3_interfaces

REST_PREFIX = "/rest"
PROTOCOL_VERSION = "1.0"
TEXT_MODES = ["text/plain", "application/json"]


@dataclass(frozen=True, slots=True)
class SkillSpec:
    """What the card says about one callable skill (a public tool or a pipeline)."""

    id: str
    name: str
    description: str
    input_schema: Mapping[str, Any]
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    requires: frozenset[str] = field(default_factory=frozenset)


def _struct(data: Mapping[str, Any]) -> Struct:
    struct = Struct()
    ParseDict(dict(data), struct)
    return struct


def build_agent_card(
    card: NodeCard,
    skills: Iterable[SkillSpec],
    public_url: str,
    *,
    grpc_address: str | None = None,
    grpc_v0_3: bool = True,
) -> AgentCard:
    """The A2A card a node serves at ``/.well-known/agent-card.json``.

    ``grpc_address`` (``host:port``) adds the gRPC binding, last: at 1.0, and at 0.3 too unless
    ``grpc_v0_3`` is off.
    """
    base = public_url.rstrip("/")
    skills = list(skills)
    agent_card = AgentCard(
        name=card.name,
        description=card.description,
        version=card.version,
        supported_interfaces=[
            AgentInterface(
                url=f"{base}/", protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION
            ),
            AgentInterface(
                url=f"{base}{REST_PREFIX}",
                protocol_binding="HTTP+JSON",
                protocol_version=PROTOCOL_VERSION,
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=card.push.enabled,
            extensions=[
                AgentExtension(
                    uri=protocol.SKILL_SCHEMAS,
                    description="Input JSON Schema of each skill, and this node's agent id.",
                    required=False,
                    params=_struct(
                        {
                            "agent_id": card.id,
                            "schemas": {s.id: dict(s.input_schema) for s in skills},
                        }
                    ),
                ),
                AgentExtension(
                    uri=protocol.HOP,
                    description="Forwarded calls carry their hop chain, limit and deadline.",
                    required=False,
                ),
            ],
        ),
        default_input_modes=TEXT_MODES,
        default_output_modes=TEXT_MODES,
        skills=[
            AgentSkill(
                id=s.id,
                name=s.name,
                description=s.description,
                tags=list(s.tags) or ["tool"],
                examples=list(s.examples),
                input_modes=TEXT_MODES,
                output_modes=TEXT_MODES,
            )
            for s in skills
        ],
    )
    if grpc_address:
        agent_card.supported_interfaces.extend(grpc_interfaces(grpc_address, v0_3=grpc_v0_3))
    if card.provider:
        agent_card.provider.CopyFrom(
            AgentProvider(organization=card.provider.organization, url=card.provider.url)
        )
    if card.documentation_url:
        agent_card.documentation_url = card.documentation_url
    if card.icon_url:
        agent_card.icon_url = card.icon_url
    if card.server.a2a_v0_3:
        add_v0_3_interfaces(agent_card)
    _add_security(agent_card, card)
    return agent_card


def _add_security(agent_card: AgentCard, card: NodeCard) -> None:
    auth = card.auth
    if auth.bearer_tokens:
        agent_card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        agent_card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    if auth.api_keys:
        agent_card.security_schemes["apiKey"].CopyFrom(
            SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name=auth.api_key_header
                )
            )
        )
        agent_card.security_requirements.append(
            SecurityRequirement(schemes={"apiKey": StringList(list=[])})
        )
