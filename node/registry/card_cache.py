"""A least-recently-used cache of decoded cards, bounded in bytes, keyed by (agent id, revision).

A row's revision changes at every write (:mod:`node.registry.schema`), so an entry can never be
stale: a re-registered card is simply a new key, and the old one ages out. No invalidation, no
coordination between replicas.
"""

from __future__ import annotations

from collections import OrderedDict

from node.registry.store import Card


class CardCache:
    """At most ``max_bytes`` of cards (by their JSON size), least recently used dropped first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple[str, str], Card] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, agent_id: str, rev: str) -> Card | None:
        card = self._entries.get((agent_id, rev))
        if card is not None:
            self._entries.move_to_end((agent_id, rev))
        return card

    def put(self, agent_id: str, rev: str, card: Card) -> None:
        if card.size > self.max_bytes // 8:  # one huge card must not empty the cache
            return
        old = self._entries.pop((agent_id, rev), None)
        if old is not None:
            self.bytes -= old.size
        self._entries[(agent_id, rev)] = card
        self.bytes += card.size
        while self.bytes > self.max_bytes:
            _, dropped = self._entries.popitem(last=False)
            self.bytes -= dropped.size
