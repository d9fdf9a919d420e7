"""Check a card URL, validate a fetched card, and turn it into what the registry stores.

Fetching is :mod:`node.registry.fetcher`'s (SSRF guard, slots, conditional requests).

Limits (each refused with a 4xx naming it, before anything is stored):

- ``card_url``: an absolute http(s) URL without credentials, control characters or unpaired
  surrogates, at most :data:`MAX_URL_BYTES` bytes of UTF-8 (under PostgreSQL's index row size);
- the card: at most ``max_card_bytes``, JSON under :mod:`node.registry.safejson`'s rules (finite
  numbers, nesting at most 64 deep, no NUL or unpaired surrogates anywhere), an A2A ``AgentCard``
  with a name of at most :data:`MAX_NAME_CHARS` characters, a url in ``supportedInterfaces``, a
  ``skills`` list, skill ids and tags of at most :data:`MAX_SKILL_TEXT_CHARS` characters each;
- the agent id (declared, or a slug of the name): :data:`node.protocol.AGENT_ID_PATTERN`, the
  rule a node's own card follows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from a2a.compat.v0_3 import conversions as v03_conversions
from a2a.compat.v0_3 import types as v03_types
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict, ParseError
from pydantic import ValidationError

from node.protocol import AGENT_ID_PATTERN, HOP, SKILL_SCHEMAS
from node.registry import card_shape, safejson
from node.registry.errors import (
    InvalidCard,
    InvalidUrl,
)
from node.registry.records import AgentRecord, Skill

MAX_URL_BYTES = 2048
MAX_NAME_CHARS = 256
MAX_SKILL_TEXT_CHARS = 256
_CONTROL = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class CardInfo:
    """The parts of a validated card the registry indexes, plus the card itself."""

    agent_id: str
    name: str
    description: str
    skills: tuple[Skill, ...]
    card: dict[str, Any]
    text: str | None = None
    """The JSON text ``card`` was parsed from (a fetched body), stored as it is."""


def check_card_url(url: object) -> str:
    """Return ``url`` if it is an absolute http(s) URL, else raise :class:`InvalidUrl`."""
    if not isinstance(url, str) or not url:
        raise InvalidUrl("card_url must be a non-empty string")
    if len(url) > MAX_URL_BYTES or len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES:
        raise InvalidUrl(f"card_url is longer than {MAX_URL_BYTES} bytes")
    if _CONTROL.search(url):
        raise InvalidUrl("card_url must not contain control characters or unpaired surrogates")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise InvalidUrl(f"card_url is not a valid URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidUrl(f"card_url must be an absolute http(s) URL, got {url[:200]!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrl("card_url must not carry credentials (user:password@)")
    return url


def card_from_body(body: bytes) -> CardInfo:
    """Validate fetched card bytes (see :mod:`node.registry.fetcher`) as a card."""
    try:
        document = safejson.loads(body)
    except safejson.UnsafeJson as exc:
        raise InvalidCard(f"card is not JSON the registry accepts: {exc}") from exc
    info = parse_card(document, checked=True)
    # safejson.loads read it as strict UTF-8 JSON, so the text reads back as the same card
    return replace(info, text=body.decode("utf-8"))


def parse_card(document: object, *, checked: bool = False) -> CardInfo:
    """Validate a card document as an A2A ``AgentCard`` and extract what the registry indexes
    (``checked``: the document came from :func:`safejson.loads`, so its walk is skipped)."""
    if not isinstance(document, dict):
        raise InvalidCard("card must be a JSON object")
    try:
        if not checked:
            safejson.check(document)
    except safejson.UnsafeJson as exc:
        raise InvalidCard(f"card is not JSON the registry accepts: {exc}") from exc
    card = _card_view(document)
    if not card.name.strip():
        raise InvalidCard("card has no name")
    if len(card.name) > MAX_NAME_CHARS:
        raise InvalidCard(f"card name is longer than {MAX_NAME_CHARS} characters")
    if not card.has_interface_url:
        raise InvalidCard("card has no supportedInterfaces entry with a url")
    if not isinstance(document.get("skills"), list):
        raise InvalidCard("card has no skills list")
    _check_skills(card.skills)
    return CardInfo(_agent_id(card), card.name, card.description, card.skills, document)


@dataclass(frozen=True, slots=True)
class _CardView:
    """What the registry reads from a valid card, however it was validated."""

    name: str
    description: str
    has_interface_url: bool
    skills: tuple[Skill, ...]
    extensions: tuple[tuple[str, Mapping[str, Any]], ...]  # (uri, params)


def _card_view(document: dict[str, Any], *, fast: bool = True) -> _CardView:
    """Validate ``document`` as an A2A ``AgentCard``: straight from the dict when
    :func:`card_shape.fits` vouches that ``ParseDict`` accepts it (most cards), else by
    ``ParseDict`` (or the 0.3 model) itself, which accepts or refuses as it always has."""
    if fast and "supportedInterfaces" in document and card_shape.fits(document):
        return _view_of_dict(document)
    card = _agent_card(document)
    return _CardView(
        card.name,
        card.description,
        any(i.url for i in card.supported_interfaces),
        tuple(
            Skill(id=s.id, name=s.name, description=s.description, tags=tuple(s.tags))
            for s in card.skills
        ),
        tuple((e.uri, e.params) for e in card.capabilities.extensions),
    )


def _view_of_dict(document: dict[str, Any]) -> _CardView:
    """The view of a card :func:`card_shape.fits` accepted (absent fields read as protobuf
    defaults, as from the parsed message)."""
    get = card_shape.field
    interfaces = get(document, "supportedInterfaces", "supported_interfaces", [])
    capabilities = get(document, "capabilities", "capabilities", {})
    return _CardView(
        get(document, "name", "name"),
        get(document, "description", "description"),
        any(get(i, "url", "url") for i in interfaces),
        tuple(
            Skill(
                id=get(s, "id", "id"),
                name=get(s, "name", "name"),
                description=get(s, "description", "description"),
                tags=tuple(get(s, "tags", "tags", [])),
            )
            for s in get(document, "skills", "skills", [])
        ),
        tuple(
            (get(e, "uri", "uri"), get(e, "params", "params", {}))
            for e in get(capabilities, "extensions", "extensions", [])
        ),
    )


def _agent_card(document: dict[str, Any]) -> AgentCard:
    """The card as A2A 1.0; a 0.3-only card (``url``, no ``supportedInterfaces``) is converted
    by the SDK's compat layer, so agents built on a2a-sdk 0.3 can register too."""
    try:
        if "supportedInterfaces" not in document and "url" in document:
            legacy = v03_types.AgentCard.model_validate(document)
            return v03_conversions.to_core_agent_card(legacy)
        card: AgentCard = ParseDict(document, AgentCard(), ignore_unknown_fields=True)
        return card
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise InvalidCard(f"not an A2A 0.3 AgentCard: {problems}") from exc
    except (ParseError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise InvalidCard(f"not an A2A AgentCard: {str(exc)[:300]}") from exc


def check_record(record: AgentRecord) -> None:
    """Raise :class:`InvalidCard` unless a stored ``record`` meets today's rules for new ones."""
    if not AGENT_ID_PATTERN.match(record.id):
        raise InvalidCard(f"agent id {record.id[:40]!r} does not match {AGENT_ID_PATTERN.pattern}")
    url = record.card_url
    if (
        not url.startswith(("http://", "https://"))
        or len(url.encode("utf-8", "surrogatepass")) > MAX_URL_BYTES
        or _CONTROL.search(url)
    ):
        raise InvalidCard(f"the card_url {url[:100]!r} is not one the registry accepts")
    if not isinstance(record.card, dict):
        raise InvalidCard("the stored card is not a JSON object")
    if not record.name.strip() or len(record.name) > MAX_NAME_CHARS:
        raise InvalidCard(f"the name must have 1 to {MAX_NAME_CHARS} characters")
    _check_skills(record.skills)


def _check_skills(skills: tuple[Skill, ...]) -> None:
    for skill in skills:
        for text in (skill.id, *skill.tags):
            if len(text) > MAX_SKILL_TEXT_CHARS:
                raise InvalidCard(
                    f"skill ids and tags must have at most {MAX_SKILL_TEXT_CHARS} characters "
                    f"(skill {skill.id[:40]!r})"
                )


def _agent_id(card: _CardView) -> str:
    """Declared in the SKILL_SCHEMAS (or HOP) extension's params, else a slug of the name.

    The same rule as :func:`node.peers.cards.agent_id`, so a node has one id everywhere.
    """
    for uri in (SKILL_SCHEMAS, HOP):
        for ext_uri, params in card.extensions:
            if ext_uri == uri and "agent_id" in params:
                agent_id = params["agent_id"]
                if not isinstance(agent_id, str) or not AGENT_ID_PATTERN.match(agent_id):
                    raise InvalidCard(f"agent_id in {uri} must match {AGENT_ID_PATTERN.pattern}")
                return agent_id
    slug = re.sub(r"[^a-z0-9]+", "-", card.name.lower()).strip("-") or "agent"
    if not AGENT_ID_PATTERN.match(slug):
        raise InvalidCard(f"the name yields the id {slug[:40]!r}...; declare a shorter agent_id")
    return slug
