"""The in-memory index that answers every search (the store is only the durable copy).

Entries are kept in one sorted list of keys ``(casefolded name, id)`` — the stable order pages
follow — plus inverted sets by skill id and by tag. A search intersects the sets it can, then walks
the keys from the page cursor, filtering by text and by a caller-supplied predicate (health).

Free text is matched with ``str.find`` over one string holding every entry's searchable text in
key order (rebuilt lazily after a change of names, skills or membership; heartbeats don't touch
it), so a query that matches nothing scans 10,000 entries at C speed rather than in a loop.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from node.registry.records import AgentRecord

Key = tuple[str, str]
_FIELD, _ROW = "\x00", "\x01"  # separators; never part of a needle


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
    return _FIELD.join(parts).casefold().replace(_ROW, " ")


class AgentIndex:
    """Records by id, ordered by (name, id), with skill, tag and text lookups."""

    def __init__(self) -> None:
        self._rows: dict[str, _Row] = {}
        self._keys: list[Key] = []
        self._by_skill: dict[str, set[str]] = {}
        self._by_tag: dict[str, set[str]] = {}
        self._by_url: dict[str, str] = {}
        self._text: tuple[str, list[int]] | None = None  # all haystacks, start of each

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
        old = self._rows.get(record.id)
        if old is not None and _same_index_entry(old.record, record):
            self._rows[record.id] = _Row(record, old.key, old.haystack)  # e.g. a heartbeat
            return
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
        self._text = None

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
        self._text = None
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
        needle = q.casefold() if q else None
        if needle is not None and (_FIELD in needle or _ROW in needle):
            return [], None
        keys = self._keys
        if candidates is not None and len(candidates) * 8 < len(keys):
            keys = sorted(self._rows[i].key for i in candidates)  # few: check each one
        start = bisect_right(keys, after) if after is not None else 0
        positions: Iterable[int] = range(start, len(keys))
        if needle is not None and keys is self._keys:
            positions, needle = self._text_matches(needle, start), None
        rows: list[_Row] = []
        for index in positions:
            row = self._rows[keys[index][1]]
            if candidates is not None and row.record.id not in candidates:
                continue
            if needle is not None and needle not in row.haystack:
                continue
            if accept is not None and not accept(row.record):
                continue
            if len(rows) == limit:
                return [r.record for r in rows], rows[-1].key
            rows.append(row)
        return [r.record for r in rows], None

    def _text_matches(self, needle: str, start: int) -> Iterator[int]:
        """Positions in ``_keys`` (from ``start``) whose haystack contains ``needle``, in order."""
        if self._text is None:
            haystacks = [self._rows[key[1]].haystack for key in self._keys]
            starts, offset = [], 0
            for haystack in haystacks:
                starts.append(offset)
                offset += len(haystack) + 1
            self._text = (_ROW.join(haystacks), starts)
        text, starts = self._text
        if start >= len(starts):
            return
        pos = starts[start]
        while (found := text.find(needle, pos)) >= 0:
            index = bisect_right(starts, found) - 1
            yield index
            if index + 1 >= len(starts):
                return
            pos = starts[index + 1]


def _same_index_entry(a: AgentRecord, b: AgentRecord) -> bool:
    return (a.name, a.description, a.card_url, a.skills) == (
        b.name,
        b.description,
        b.card_url,
        b.skills,
    )


def _discard(table: dict[str, set[str]], value: str, agent_id: str) -> None:
    ids = table.get(value)
    if ids is not None:
        ids.discard(agent_id)
        if not ids:
            del table[value]
