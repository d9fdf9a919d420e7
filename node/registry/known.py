"""The agents this replica has recently answered a heartbeat for, so the next one reads nothing.

A heartbeat needs the agent's entry without its card (the answer renders it) and the knowledge
that the row still exists. :class:`KnownAgents` keeps the last ``size`` such entries (least
recently used dropped first, so memory is bounded whatever the number of agents), each with the
row revision it was read at, and the part of its heartbeat answer that only a new revision
changes (:meth:`KnownAgents.head`, rendered once by :mod:`node.registry.heartbeat_route`). An
entry is put here only from a database read, and dropped when this replica writes or deletes
the row, and when the batched heartbeat ``UPDATE`` (:meth:`HeartbeatBatch.flush`, given the
revisions kept here) reports that the row is gone, was rewritten (another revision:
re-registered through another replica) or is no longer served. So an agent deleted through any
replica answers 404 from the first heartbeat after the next flush that carries one of its beats.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from node.registry.records import AgentRecord

DEFAULT_SIZE = 100_000
"""Entries kept by default (``RegistrySettings.known_agents``): about 2.7 kB each with a few
skills (the entry without its card, 1.7 kB, and its rendered answer, 1 kB; see
bench/RESULTS.md), so ~270 MB when full."""


@dataclass(slots=True)
class Known:
    """One remembered entry: what a heartbeat's answer is made of."""

    rev: str
    record: AgentRecord  # as read: its last_seen is the read's, the newest is ``last_seen``
    last_seen: float
    head: tuple[bytes, bytes] | None = None


class KnownAgents:
    """Agent id → (row revision, entry without card), least recently used dropped first.

    When more agents beat than ``size`` they take turns (each heartbeat misses and reads its row
    again, in a batch): size it for the fleet.

    A heartbeat stores only its time (a float) in the entry, no new record: so the entries,
    once old, are not touched by the garbage collector's young generations and no stream of
    long-lived objects makes it run full collections (a full one over 100k entries stalled
    the loop for 0.3-1 s, the heartbeats' p99).
    """

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.size = size
        self._entries: OrderedDict[str, Known] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, agent_id: str) -> AgentRecord | None:
        found = self._entries.get(agent_id)
        if found is None:
            return None
        self._entries.move_to_end(agent_id)
        record = found.record
        if record.last_seen == found.last_seen:
            return record
        return AgentRecord(  # dataclasses.replace, at a third of its cost (the hot path)
            record.id,
            record.card_url,
            record.name,
            record.description,
            record.skills,
            record.card,
            record.registered_at,
            found.last_seen,
            record.card_etag,
        )

    def peek(self, agent_id: str) -> Known | None:
        """The remembered entry, its place in the order left alone."""
        return self._entries.get(agent_id)

    def entry(self, agent_id: str) -> Known | None:
        """The remembered entry itself (now the most recently used), or ``None``: the
        heartbeat route's hit path reads and updates it without making a record."""
        found = self._entries.get(agent_id)
        if found is not None:
            self._entries.move_to_end(agent_id)
        return found

    def put(self, agent_id: str, rev: str, record: AgentRecord) -> None:
        """Remember ``record`` (its card is left out) as read at revision ``rev``."""
        if self.size == 0:
            return
        kept = replace(record, card={}) if record.card else record
        self._entries[agent_id] = Known(rev, kept, record.last_seen)
        self._entries.move_to_end(agent_id)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def touch(self, agent_id: str, record: AgentRecord) -> None:
        """Keep ``record.last_seen`` (a newer heartbeat; nothing else of ``record`` changes
        with one) for a remembered entry; nothing if it is not remembered."""
        found = self._entries.get(agent_id)
        if found is not None:
            found.last_seen = record.last_seen

    def head(self, agent_id: str) -> tuple[bytes, bytes] | None:
        """What was kept with :meth:`keep_head` for the entry's revision (``None``: nothing)."""
        found = self._entries.get(agent_id)
        return None if found is None else found.head

    def keep_head(self, agent_id: str, head: tuple[bytes, bytes]) -> None:
        """Keep the parts of the entry's answer that change only with its revision."""
        found = self._entries.get(agent_id)
        if found is not None:
            found.head = head

    def drop(self, agent_ids: Iterable[str]) -> None:
        for agent_id in agent_ids:
            self._entries.pop(agent_id, None)

    def revs(self, agent_ids: Iterable[str]) -> dict[str, str]:
        """The revision each remembered id of ``agent_ids`` was read at (the heartbeat
        ``UPDATE`` reports those whose row is gone, rewritten or no longer served: they are
        then dropped)."""
        entries = self._entries
        return {i: e.rev for i in agent_ids if (e := entries.get(i)) is not None}
