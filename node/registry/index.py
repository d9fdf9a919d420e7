"""The in-memory index that answers every search (the store is only the durable copy).

Entries are kept in one sorted list of keys ``(casefolded name, id)`` — the stable order pages
follow — plus inverted sets by skill id and by tag. A search intersects the sets it can, then walks
the keys from the page cursor, filtering by text and by a caller-supplied predicate (health).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from node.registry.records import AgentRecord

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Row:
    record: AgentRecord
    key: Key
    haystack: str


def sort_key(record: AgentRecord) -> Key:
    return (record.name.casefold(), record.id)


def _haystack(record: AgentRecord) -> str:
    parts = [record.name, record.description]
    for s in record.skills:
        parts.extend((s.id, s.name, s.description, *s.tags))
    return "\x00".join(parts).casefold()


class AgentIndex:
    """Records by id, ordered by (name, id), with skill and tag lookups."""

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        self._keys: list[Key] = []
        self._by_skill: dict[str, set[str]] = {}
        self._by_tag: dict[str, set[str]] = {}
        self._by_url: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[AgentRecord]:
        return (row.record for row in list(self._rows.values()))

    def get(self, agent_id: str) -> AgentRecord | None:
        row = self._rows.get(agent_id)
        return row.record if row else None

    def id_for_url(self, card_url: str) -> str | None:
        return self._by_url.get(card_url)

    def put(self, record: AgentRecord) -> None:
        """Add or replace ``record`` (and any entry holding the same card URL)."""
        self.remove(record.id)
        if (other := self._by_url.get(record.card_url)) is not None:
            self.remove(other)
        row = _Row(record, sort_key(record), _haystack(record))
        self._rows[record.id] = row
        insort(self._keys, row.key)
        self._by_url[record.card_url] = record.id
        for skill in record.skills:
            self._by_skill.setdefault(skill.id, set()).add(record.id)
            for tag in skill.tags:
                self._by_tag.setdefault(tag, set()).add(record.id)

    def remove(self, agent_id: str) -> AgentRecord | None:
        row = self._rows.pop(agent_id, None)
        if row is None:
            return None
        del self._keys[bisect_left(self._keys, row.key)]
        del self._by_url[row.record.card_url]
        for skill in row.record.skills:
            _discard(self._by_skill, skill.id, agent_id)
            for tag in skill.tags:
                _discard(self._by_tag, tag, agent_id)
        return row.record

    def search(
        self,
        *,
        skill: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        accept: Callable[[AgentRecord], bool] | None = None,
        after: Key | None = None,
        limit: int = 50,
    ) -> tuple[list[AgentRecord], Key | None]:
        """Up to ``limit`` matches after the cursor ``after``, and the cursor of the next page."""
        candidates: set[str] | None = None
        for table, value in ((self._by_skill, skill), (self._by_tag, tag)):
            if value is not None:
                found = table.get(value, set())
                candidates = found if candidates is None else candidates & found
        keys = self._keys
        if candidates is not None and len(candidates) * 8 < len(keys):
            keys = sorted(self._rows[i].key for i in candidates)
        needle = q.casefold() if q else None
        start = bisect_right(keys, after) if after is not None else 0
        found_rows: list[_Row] = []
        for index in range(start, len(keys)):
            row = self._rows[keys[index][1]]
            if candidates is not None and row.record.id not in candidates:
                continue
            if needle is not None and needle not in row.haystack:
                continue
            if accept is not None and not accept(row.record):
                continue
            if len(found_rows) == limit:
                return [r.record for r in found_rows], found_rows[-1].key
            found_rows.append(row)
        return [r.record for r in found_rows], None


def _discard(table: dict[str, set[str]], value: str, agent_id: str) -> None:
    ids = table.get(value)
    if ids is not None:
        ids.discard(agent_id)
        if not ids:
            del table[value]
