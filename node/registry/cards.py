"""Fetch an agent card through the SSRF guard and turn it into what the registry stores."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict, ParseError

from node.errors import GuardError, ToolError
from node.extensions import HOP, SKILL_SCHEMAS
from node.registry.errors import (
    CardTooLarge,
    CardUnreachable,
    InvalidCard,
    InvalidUrl,
    UrlRefused,
)
from node.registry.records import Skill
from node.tooling.guards.urls import UrlGuard

AGENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_URL_LENGTH = 2048
_ACCEPT = {"Accept": "application/json"}


@dataclass(frozen=True, slots=True)
class CardInfo:
    """The parts of a validated card the registry indexes, plus the card itself."""

    agent_id: str
    name: str
    description: str
    skills: tuple[Skill, ...]
    card: dict[str, Any]


def check_card_url(url: object) -> str:
    """Return ``url`` if it is an absolute http(s) URL, else raise :class:`InvalidUrl`."""
    if not isinstance(url, str) or not url:
        raise InvalidUrl("card_url must be a non-empty string")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidUrl(f"card_url must be an absolute http(s) URL, got {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrl("card_url must not carry credentials (user:password@)")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidUrl(f"card_url is longer than {MAX_URL_LENGTH} characters")
    return url


async def fetch_card(
    http: httpx.AsyncClient, guard: UrlGuard, url: str, *, timeout_s: float, max_bytes: int
) -> CardInfo:
    """GET the card at ``url`` (through ``guard``) and validate it."""
    try:
        response = await guard.fetch(
            http, "GET", url, headers=_ACCEPT, timeout=timeout_s, max_bytes=max_bytes
        )
    except GuardError as exc:
        # The guard raises GuardError for refused addresses, unresolvable names and oversized
        # bodies alike; its messages are the only way to tell them apart.
        text = str(exc)
        if "larger than max_bytes" in text:
            raise CardTooLarge(f"card is larger than {max_bytes} bytes") from exc
        if "does not resolve" in text:
            raise CardUnreachable(f"card URL unreachable: {text}") from exc
        raise UrlRefused(f"card URL refused: {text}") from exc
    except ToolError as exc:
        raise CardUnreachable(f"card URL unreachable: {exc}") from exc
    if not 200 <= response.status_code < 300:
        raise CardUnreachable(f"card URL answered HTTP {response.status_code}")
    if len(response.content) > max_bytes:
        raise CardTooLarge(f"card is larger than {max_bytes} bytes")
    try:
        document = json.loads(response.content)
    except ValueError as exc:
        raise InvalidCard(f"card is not JSON: {exc}") from exc
    return parse_card(document)


def parse_card(document: object) -> CardInfo:
    """Validate a card document as an A2A ``AgentCard`` and extract what the registry indexes."""
    if not isinstance(document, dict):
        raise InvalidCard("card must be a JSON object")
    try:
        card = ParseDict(document, AgentCard(), ignore_unknown_fields=True)
    except ParseError as exc:
        raise InvalidCard(f"not an A2A AgentCard: {exc}") from exc
    if not card.name.strip():
        raise InvalidCard("card has no name")
    if not any(i.url for i in card.supported_interfaces):
        raise InvalidCard("card has no supportedInterfaces entry with a url")
    if not isinstance(document.get("skills"), list):
        raise InvalidCard("card has no skills list")
    skills = tuple(
        Skill(id=s.id, name=s.name, description=s.description, tags=tuple(s.tags))
        for s in card.skills
    )
    return CardInfo(_agent_id(card), card.name, card.description, skills, document)


def _agent_id(card: AgentCard) -> str:
    """Declared in the SKILL_SCHEMAS (or HOP) extension's params, else a slug of the name.

    The same rule as :func:`node.peers.cards.agent_id`, so a node has one id everywhere.
    """
    for uri in (SKILL_SCHEMAS, HOP):
        for ext in card.capabilities.extensions:
            if ext.uri == uri and "agent_id" in ext.params:
                agent_id = ext.params["agent_id"]
                if not isinstance(agent_id, str) or not AGENT_ID_PATTERN.match(agent_id):
                    raise InvalidCard(f"agent_id in {uri} must match {AGENT_ID_PATTERN.pattern}")
                return agent_id
    slug = re.sub(r"[^a-z0-9]+", "-", card.name.lower()).strip("-") or "agent"
    if not AGENT_ID_PATTERN.match(slug):
        raise InvalidCard(f"the name yields the id {slug[:40]!r}...; declare a shorter agent_id")
    return slug
