"""The registry's operations: register, heartbeat, deregister, get, search, sweep.

The in-memory :class:`AgentIndex` answers reads; the :class:`AgentStore` is written first on every
registration and deletion, so a failed write leaves the index untouched. Heartbeats update the
index at once and reach the store in batches (:mod:`node.registry.heartbeats`). Replicas on one
database follow each other's changes (:mod:`node.registry.replicas`); a heartbeat, deletion or
registration naming an agent this replica does not know yet reads its row first. Health comes
from an injectable clock.

One bad entry never breaks a read for everyone: an entry is served only if it meets today's rules
and renders as JSON. A stored row that does not (written by an older version, or by hand) is
*unreadable*: logged once, left out of every listing and search, counted in ``/healthz`` and in
listings, answered with 404 ``unreadable_entry`` by id (so its node registers again), and deleted
by ``DELETE /v1/agents/{id}`` or replaced by a new registration.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from uuid import uuid4

import httpx

from node.protocol import AGENT_ID_PATTERN
from node.registry import safejson
from node.registry.cards import check_card_url, check_record, fetch_card
from node.registry.errors import (
    AgentNotFound,
    BadRequest,
    CardError,
    Conflict,
    InvalidCard,
    UnreadableEntry,
)
from node.registry.heartbeats import HeartbeatBatch
from node.registry.index import AgentIndex, Key
from node.registry.records import RENDER_ERRORS, AgentRecord, iso, render_entry
from node.registry.replicas import ReplicaFollower
from node.registry.settings import RegistrySettings
from node.registry.store import AgentStore, BadRow, HeldElsewhere
from node.tooling.guards.urls import UrlGuard

log = logging.getLogger(__name__)

Clock = Callable[[], float]
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50
MAX_QUERY_CHARS = 1024
"""Longest ``skill``, ``tag`` and ``q`` accepted (skill ids and tags are at most 256)."""
MAX_TOKEN_CHARS = 4096
"""Longest ``page_token`` accepted (the longest this registry issues is about 3,500)."""
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Query:
    skill: str | None = None
    tag: str | None = None
    q: str | None = None
    healthy: bool | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise BadRequest(f"page_size must be between 1 and {MAX_PAGE_SIZE}")
        for name, limit in (
            ("skill", MAX_QUERY_CHARS),
            ("tag", MAX_QUERY_CHARS),
            ("q", MAX_QUERY_CHARS),
            ("page_token", MAX_TOKEN_CHARS),
        ):
            check_text(name, getattr(self, name), limit)


def check_text(name: str, value: str | None, limit: int) -> None:
    """Raise :class:`BadRequest` for a text parameter over ``limit`` characters or holding a NUL
    character or an unpaired surrogate."""
    if value is None:
        return
    if len(value) > limit:
        raise BadRequest(f"{name} is longer than {limit} characters")
    if _BAD_TEXT.search(value):
        raise BadRequest(f"{name} must not contain NUL characters or unpaired surrogates")


def check_agent_id(agent_id: str) -> str:
    """``agent_id`` if it can name an agent, else :class:`BadRequest` (nothing is looked up)."""
    if not AGENT_ID_PATTERN.match(agent_id) or len(agent_id) > 128:
        raise BadRequest(f"agent ids match {AGENT_ID_PATTERN.pattern}; got {agent_id[:140]!r}")
    return agent_id


@dataclass(frozen=True, slots=True)
class Page:
    agents: list[AgentRecord]
    next_page_token: str | None


class Registry:
    """Agents by id, kept in memory and in the store, with TTL-based health and eviction."""

    def __init__(
        self,
        settings: RegistrySettings,
        store: AgentStore,
        http: Callable[[], httpx.AsyncClient],
        clock: Clock = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._store = store
        self._http = http
        self._guard = UrlGuard(allow_cidrs=list(settings.allow_cidrs))
        self._index = AgentIndex()
        self._write = asyncio.Lock()
        self._last_sweep = float("-inf")
        self._unreadable: dict[str, str] = {}  # stored but not served: id -> why
        self.origin = uuid4().hex  # this replica, in the change log
        self._beats = HeartbeatBatch(store, settings.heartbeat_flush)
        self._follower = ReplicaFollower(self, store, settings.sync_interval_s)

    async def start(self) -> None:
        """Load the index (the store must be open), then flush heartbeats and follow the other
        replicas in the background until :meth:`aclose`."""
        await self._follower.reload()
        self._beats.start()
        self._follower.start()

    async def aclose(self) -> None:
        """Stop following and write the heartbeats still queued."""
        await self._follower.aclose()
        await self._beats.aclose()

    async def flush(self) -> None:
        """Write the queued heartbeats now (tests, and before a sweep)."""
        await self._beats.flush()

    async def sync(self) -> None:
        """Apply the other replicas' changes now (tests; otherwise every ``sync_interval_s``)."""
        await self._follower.step()

    async def load(self) -> None:
        """(Re)fill the index from the store; rows that cannot be served are set aside."""
        async with self._write:  # no registration lands in the index being replaced
            records, bad_rows = await self._store.load_all()
            self._fill(records, bad_rows)

    def _fill(self, records: list[AgentRecord], bad_rows: list[BadRow]) -> None:
        self._index, self._unreadable = AgentIndex(), {}
        for row in bad_rows:
            self._set_aside(row.id, f"cannot be decoded: {row.reason}")
        for record in records:
            reason = self.unservable(record, render=False)
            if reason is not None:
                self._set_aside(record.id, reason)
            else:
                self._put(record)
        log.info(
            "registry loaded %d agents (%d unreadable entries left out)",
            len(self._index),
            len(self._unreadable),
        )

    def __len__(self) -> int:
        return len(self._index)

    @property
    def write_transactions(self) -> int:
        """Write transactions this replica has made on its store (tests and benches)."""
        return self._store.write_transactions

    # -- unreadable entries -----------------------------------------------------------------

    @property
    def unreadable(self) -> int:
        """How many stored entries are left out because they cannot be served."""
        return len(self._unreadable)

    def unservable(self, record: AgentRecord, *, render: bool = True) -> str | None:
        """Why ``record`` cannot be served, or ``None`` when it can: today's rules for new
        entries, and its times in range; with ``render``, it is also rendered as JSON once
        (at load the decoded columns already guarantee that, and each read renders anyway)."""
        try:
            check_record(record)
            if render:
                render_entry(
                    record, healthy=True, expires_at=self.expires_at(record), with_card=True
                )
            else:
                for t in (record.registered_at, record.last_seen, self.expires_at(record)):
                    iso(t)
        except CardError as exc:
            return str(exc)
        except RENDER_ERRORS as exc:
            return f"cannot be rendered as JSON ({type(exc).__name__}: {str(exc)[:200]})"
        return None

    def set_aside(self, record: AgentRecord, reason: str) -> None:
        """Stop serving ``record`` (found unservable while answering); logged once."""
        if self._index.get(record.id) is record:
            self._index.remove(record.id)
            self._set_aside(record.id, reason)

    def _set_aside(self, agent_id: str, reason: str) -> None:
        if agent_id not in self._unreadable:
            log.warning(
                "registry entry %r is unreadable and left out of listings: %s", agent_id, reason
            )
        self._unreadable[agent_id] = reason

    def _put(self, record: AgentRecord) -> None:
        self._index.put(record)
        self._unreadable.pop(record.id, None)

    # -- other replicas ---------------------------------------------------------------------

    async def apply(self, changed: Iterable[str], beats: dict[str, float]) -> None:
        """Re-read the rows other replicas ``changed`` into the index, and take their newer
        heartbeat times (``beats``: id → last_seen) for agents already known."""
        async with self._write:
            ids = list(changed)
            if ids:
                self._take(ids, await self._store.get(ids))
            for agent_id, last_seen in beats.items():
                record = self._index.get(agent_id)
                if record is not None and last_seen > record.last_seen:
                    self._index.put(replace(record, last_seen=last_seen))

    async def _refresh(self, agent_id: str) -> AgentRecord | None:
        """The agent as stored now (read into the index), for ids this replica does not know."""
        self._take([agent_id], await self._store.get([agent_id]))
        return self._index.get(agent_id)

    def _take(self, ids: list[str], rows: dict[str, AgentRecord | BadRow]) -> None:
        for agent_id in ids:
            row = rows.get(agent_id)
            if row is None:
                self._index.remove(agent_id)
                self._unreadable.pop(agent_id, None)
                self._beats.discard(agent_id)
            elif isinstance(row, BadRow):
                self._index.remove(agent_id)
                self._set_aside(agent_id, f"cannot be decoded: {row.reason}")
            else:
                known = self._index.get(agent_id)
                if known is not None and known.last_seen > row.last_seen:
                    row = replace(row, last_seen=known.last_seen)
                reason = self.unservable(row, render=False)
                if reason is not None:
                    self._index.remove(agent_id)
                    self._set_aside(agent_id, reason)
                else:
                    self._put(row)

    # -- health -----------------------------------------------------------------------------

    def expires_at(self, record: AgentRecord) -> float:
        return record.last_seen + self.settings.ttl_s

    def is_healthy(self, record: AgentRecord, now: float | None = None) -> bool:
        return (self.clock() if now is None else now) - record.last_seen <= self.settings.ttl_s

    def _is_evicted(self, record: AgentRecord, now: float) -> bool:
        return now - record.last_seen > self.settings.evict_after

    # -- writes -----------------------------------------------------------------------------

    async def register(self, card_url: object) -> tuple[AgentRecord, bool]:
        """Fetch and validate the card, then store it. Returns the record and whether it is new."""
        url = check_card_url(card_url)
        s = self.settings
        info = await fetch_card(
            self._http(), self._guard, url, timeout_s=s.fetch_timeout_s, max_bytes=s.max_card_bytes
        )
        async with self._write:
            now = self.clock()
            holder = self._index.get(info.agent_id)
            if holder is not None and self._is_evicted(holder, now):
                holder = None
            if holder is not None and holder.card == info.card:
                return self._again(holder, now, url), False
            if holder is not None and holder.card_url != url:
                raise self._conflict(info.agent_id, holder.card_url)
            record = AgentRecord(
                id=info.agent_id,
                card_url=url,
                name=info.name,
                description=info.description,
                skills=info.skills,
                card=info.card,
                registered_at=now,
                last_seen=now,
            )
            if (reason := self.unservable(record)) is not None:
                raise InvalidCard(f"the card cannot be served: {reason}")
            try:
                record, created = await self._store.save(
                    record, origin=self.origin, live_after=now - self.settings.evict_after
                )
            except HeldElsewhere as exc:  # registered through another replica
                holder = await self._refresh(info.agent_id)
                if holder is not None and holder.card == info.card:
                    return self._again(holder, now, url), False
                raise self._conflict(info.agent_id, exc.card_url) from None
            created = created or record.id in self._unreadable  # it replaces an unreadable row
            self._put(record)
        log.info("registered agent %s from %s", record.id, url)
        return record, created

    def _again(self, holder: AgentRecord, now: float, url: str) -> AgentRecord:
        """The same card registered again (a restart, or another replica of one node, perhaps
        from its own address): a heartbeat, nothing written but the batched time."""
        log.info("agent %s registered again, unchanged, from %s", holder.id, url)
        return self._beat(holder, now)

    @staticmethod
    def _conflict(agent_id: str, card_url: str) -> Conflict:
        return Conflict(
            f"agent id {agent_id!r} is already registered from {card_url}; deregister it "
            "first or give this agent another id (replicas of one node share one public URL)"
        )

    def _beat(self, record: AgentRecord, now: float) -> AgentRecord:
        record = replace(record, last_seen=now)
        self._index.put(record)
        self._beats.add(record.id, now)
        return record

    async def heartbeat(self, agent_id: str) -> AgentRecord:
        """Answered from memory; the time reaches the store with the next batch. An agent this
        replica does not know (registered through another one) is looked up in the store."""
        try:
            record = self.get(agent_id)
        except AgentNotFound:
            async with self._write:
                stored = await self._refresh(agent_id)
            if stored is None or self._is_evicted(stored, self.clock()):
                raise
            record = stored
        return self._beat(record, self.clock())

    async def deregister(self, agent_id: str) -> None:
        """Delete the entry; an unreadable one (see :attr:`unreadable`) is deleted too."""
        async with self._write:
            if agent_id not in self._unreadable and self._index.get(agent_id) is None:
                await self._refresh(agent_id)
            if agent_id not in self._unreadable:
                self.get(agent_id)
            await self._store.delete([agent_id], origin=self.origin, now=self.clock())
            self._index.remove(agent_id)
            self._unreadable.pop(agent_id, None)
            self._beats.discard(agent_id)
        log.info("deregistered agent %s", agent_id)

    async def sweep(self) -> int:
        """Delete every entry without a heartbeat for ``evict_after`` seconds (one statement, by
        the times in the store, after writing this replica's queued heartbeats); return how
        many. On PostgreSQL one replica sweeps at a time and waits ``2 * heartbeat_flush_s``
        longer, for heartbeats other replicas have queued but not yet written."""
        await self._beats.flush()
        async with self._write:
            now = self.clock()
            self._last_sweep = now
            grace = 2 * self.settings.heartbeat_flush if self._store.dialect != "sqlite" else 0
            gone = await self._store.sweep(
                now - self.settings.evict_after - grace, origin=self.origin, now=now
            )
            for agent_id in gone or ():
                self._index.remove(agent_id)
                self._unreadable.pop(agent_id, None)
        if gone:
            log.info("evicted %d agents", len(gone))
        return len(gone or ())

    async def maybe_sweep(self) -> None:
        """Sweep if the last sweep is older than the sweep interval (called on reads)."""
        if self.clock() - self._last_sweep >= self.settings.sweep_interval:
            await self.sweep()

    # -- reads ------------------------------------------------------------------------------

    def get(self, agent_id: str) -> AgentRecord:
        record = self._index.get(agent_id)
        if record is None and agent_id in self._unreadable:
            raise UnreadableEntry(
                f"the stored entry {agent_id!r} is unreadable ({self._unreadable[agent_id]}); "
                "register the agent again or delete the entry"
            )
        if record is None or self._is_evicted(record, self.clock()):
            raise AgentNotFound(f"no agent with id {agent_id[:140]!r}")
        return record

    def search(self, query: Query) -> Page:
        now = self.clock()

        def accept(record: AgentRecord) -> bool:
            if self._is_evicted(record, now):
                return False
            return query.healthy is None or self.is_healthy(record, now) == query.healthy

        records, next_key = self._index.search(
            skill=query.skill,
            tag=query.tag,
            q=query.q,
            accept=accept,
            after=decode_token(query.page_token) if query.page_token else None,
            limit=query.page_size,
        )
        return Page(records, encode_token(next_key) if next_key else None)


def encode_token(key: Key) -> str:
    text = json.dumps(list(key), ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_token(token: str) -> Key:
    try:
        raw = safejson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError) as exc:  # UnsafeJson is a ValueError
        raise BadRequest("page_token is not a token this registry issued") from exc
    if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(p, str) for p in raw)):
        raise BadRequest("page_token is not a token this registry issued")
    return (raw[0], raw[1])
