"""What the registry knows about one agent, and its JSON shape on the wire."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from node.registry import safejson

#: What rendering a stored entry can raise (bad times, non-JSON data, lone surrogates, ...).
RENDER_ERRORS = (ValueError, TypeError, OverflowError, OSError, RecursionError)


@dataclass(frozen=True, slots=True)
class Skill:
    id: str
    name: str
    description: str
    tags: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
        }


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """One registration. Times are seconds from the registry's clock (epoch by default).

    ``card`` is ``{}`` in records read without their card (listings without ``include_card``,
    heartbeats, ``find_agents``); ``card_etag`` is the ETag the card was served with, if any.
    """

    id: str
    card_url: str
    name: str
    description: str
    skills: tuple[Skill, ...]
    card: dict[str, Any]
    registered_at: float
    last_seen: float
    card_etag: str | None = None


def iso(t: float) -> str:
    """An epoch time as an ISO 8601 UTC timestamp."""
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def record_json(
    record: AgentRecord, *, healthy: bool, expires_at: float, with_card: bool
) -> dict[str, Any]:
    """The wire shape of an entry (the card only when asked for)."""
    out: dict[str, Any] = {
        "id": record.id,
        "name": record.name,
        "description": record.description,
        "card_url": record.card_url,
        "skills": [s.to_json() for s in record.skills],
        "healthy": healthy,
        "registered_at": iso(record.registered_at),
        "last_heartbeat": iso(record.last_seen),
        "expires_at": iso(expires_at),
    }
    if with_card:
        out["card"] = record.card
    return out


def render_entry(
    record: AgentRecord, *, healthy: bool, expires_at: float, with_card: bool
) -> bytes:
    """:func:`record_json` as the bytes served; raises one of :data:`RENDER_ERRORS`."""
    return safejson.dumps(
        record_json(record, healthy=healthy, expires_at=expires_at, with_card=with_card)
    )
