"""What the registry knows about one agent, and its JSON shape on the wire."""

from __future__ import annotations

from collections import OrderedDict
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


class EntryRenderer:
    """:func:`render_entry`, byte for byte, with each entry's fixed part (id, name,
    description, card URL, skills and registration time) rendered once and kept in a bounded
    LRU keyed by those fields: a listing then encodes only health, heartbeat times and card.
    A changed entry is a new key (the old one ages out), so nothing is ever stale."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._heads: OrderedDict[tuple[Any, ...], tuple[bytes, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._heads)

    def render(
        self, record: AgentRecord, *, healthy: bool, expires_at: float, with_card: bool
    ) -> bytes:
        """Raises one of :data:`RENDER_ERRORS`, as :func:`render_entry` does."""
        key = (
            record.id,
            record.name,
            record.description,
            record.card_url,
            record.skills,
            record.registered_at,
        )
        head = self._heads.get(key)
        if head is None:
            fixed = {
                "id": record.id,
                "name": record.name,
                "description": record.description,
                "card_url": record.card_url,
                "skills": [s.to_json() for s in record.skills],
            }
            head = safejson.dumps(fixed)[:-1] + b',"healthy":', iso(record.registered_at).encode()
            self._heads[key] = head
            if len(self._heads) > self.max_entries:
                self._heads.popitem(last=False)
        else:
            self._heads.move_to_end(key)
        parts = [
            head[0],
            b'true,"registered_at":"' if healthy else b'false,"registered_at":"',
            head[1],
            b'","last_heartbeat":"',
            iso(record.last_seen).encode(),
            b'","expires_at":"',
            iso(expires_at).encode(),
            b'"',
        ]
        if with_card:
            parts += (b',"card":', safejson.dumps(record.card))
        parts.append(b"}")
        return b"".join(parts)
