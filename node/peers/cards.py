"""Peer cards: fetching them (with ETag revalidation) and reading what a2a-node puts in them.

A peer's identity is the ``agent_id`` its card declares in the ``SKILL_SCHEMAS`` (or ``HOP``)
extension's params, else a slug of its name. Skill input schemas come from the same extension.

Cards come in two versions: 1.0 (``supportedInterfaces``) and 0.3 (``url``,
``preferredTransport``, ``additionalInterfaces``, ``protocolVersion``). A 0.3-only card is
validated with the SDK's 0.3 model and converted by its compat layer
(``a2a.compat.v0_3.conversions.to_core_agent_card``): its interfaces keep version 0.3, so the
client factory picks the SDK's 0.3 transports for them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import conversions as v03_conversions
from a2a.compat.v0_3 import types as v03_types
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf import json_format
from pydantic import ValidationError

from node.errors import PeerError
from node.protocol import HOP, SKILL_SCHEMAS, normalise_numbers

__all__ = [
    "CardFetcher",
    "agent_id",
    "card_from_json",
    "card_url",
    "extension_params",
    "is_v0_3_card",
    "skill_schemas",
]

log = logging.getLogger(__name__)


def card_url(url: str) -> str:
    """The card URL of a peer given by its base URL or by its card URL."""
    if url.rstrip("/").endswith(".json"):
        return url
    return url.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH


def is_v0_3_card(data: Any) -> bool:
    """True for a 0.3-only card: a ``url`` and no 1.0 ``supportedInterfaces``."""
    return isinstance(data, dict) and "supportedInterfaces" not in data and "url" in data


def card_from_json(data: Any) -> AgentCard:
    """Parse card JSON, 1.0 or 0.3 (see the module doc); ``PeerError`` when invalid."""
    try:
        if is_v0_3_card(data):
            legacy = v03_types.AgentCard.model_validate(data)
            return v03_conversions.to_core_agent_card(legacy)
        return parse_agent_card(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise PeerError(f"invalid 0.3 agent card: {problems}") from exc
    except (json_format.Error, ValueError, TypeError) as exc:
        raise PeerError(f"invalid agent card: {exc}") from exc


def extension_params(card: AgentCard, uri: str) -> dict[str, Any] | None:
    """The params of the card's capability extension ``uri`` (``None`` when not declared)."""
    for ext in card.capabilities.extensions:
        if ext.uri == uri:
            params = normalise_numbers(json_format.MessageToDict(ext.params))
            return params if isinstance(params, dict) else {}
    return None


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "agent"


def agent_id(card: AgentCard) -> str:
    """The peer's agent id: declared by an a2a-node extension, else a slug of its name."""
    for uri in (SKILL_SCHEMAS, HOP):
        declared = (extension_params(card, uri) or {}).get("agent_id")
        if isinstance(declared, str) and declared:
            return declared
    return _slug(card.name)


def skill_schemas(card: AgentCard) -> dict[str, dict[str, Any]]:
    """Input schemas the card publishes per skill id (object-rooted ones only)."""
    schemas = (extension_params(card, SKILL_SCHEMAS) or {}).get("schemas")
    if not isinstance(schemas, dict):
        return {}
    return {k: v for k, v in schemas.items() if isinstance(v, dict) and v.get("type") == "object"}


@dataclass(slots=True)
class _Cached:
    etag: str
    card: AgentCard


class CardFetcher:
    """Fetches cards on a shared client, revalidating with ``If-None-Match`` when an ETag came."""

    def __init__(self, http: httpx.AsyncClient, *, timeout_s: float = 5.0) -> None:
        self._http, self._timeout = http, timeout_s
        self._cache: dict[str, _Cached] = {}

    async def fetch(self, url: str) -> AgentCard:
        """The card at ``url`` (base or card URL); ``PeerError`` when it cannot be had."""
        target = card_url(url)
        cached = self._cache.get(target)
        headers = {"If-None-Match": cached.etag} if cached else {}
        try:
            response = await self._http.get(target, headers=headers, timeout=self._timeout)
            if response.status_code == 304 and cached is not None:
                return cached.card
            response.raise_for_status()
            card = card_from_json(response.json())
        except (httpx.HTTPError, ValueError) as exc:
            raise PeerError(f"cannot fetch the card at {target}: {exc}") from exc
        if etag := response.headers.get("ETag"):
            self._cache[target] = _Cached(etag, card)
        return card
