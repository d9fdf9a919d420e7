"""The registry's operations: register, heartbeat, deregister, get, search, sweep.

Every read and search is answered by the :class:`AgentStore` (SQL over its indexes, see
:mod:`node.registry.search_sql`), so memory does not grow with the number of agents and replicas on
one database agree as soon as a write commits. Registrations and deletions are written before the
API answers; heartbeats reach the store in batches (:mod:`node.registry.heartbeats`), and until
then this replica's own reads see them. A heartbeat is checked against a bounded cache of the
entries recently read (:mod:`node.registry.known`, kept true by each batch's ``UPDATE``), and
against the store only on a miss (misses arriving together read in one query). Cards for
``include_card`` pages come through a bounded cache keyed by row revision
(:mod:`node.registry.card_cache`). Health comes from an injectable clock.

One bad entry never breaks a read for everyone: an entry is served only if it meets today's rules
and renders as JSON. A stored row that does not (written by an older version, or by hand) is
*unreadable*: logged, left out of every listing and search (no ``name_key``, see
:mod:`node.registry.schema`), counted in ``/healthz`` and in listings, answered with 404
``unreadable_entry`` by id (so its node registers again), and deleted by ``DELETE /v1/agents/{id}``
or replaced by a new registration.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial

import httpx

from node.errors import RegistryError
from node.protocol import AGENT_ID_PATTERN
from node.registry import safejson
from node.registry.batching import Batcher
from node.registry.bulk import Outcome, Prepared, Unchanged, prepare, prepare_all
from node.registry.card_cache import CardCache
from node.registry.cards import check_card_url, check_record
from node.registry.errors import (
    AgentNotFound,
    BadRequest,
    Busy,
    CardError,
    Conflict,
    InvalidCard,
    InvalidUrl,
    UnreadableEntry,
)
from node.registry.fetcher import CardFetcher
from node.registry.heartbeats import HeartbeatBatch
from node.registry.known import KnownAgents
from node.registry.records import RENDER_ERRORS, AgentRecord, iso, render_entry
from node.registry.search_sql import Filter, Key
from node.registry.settings import RegistrySettings
from node.registry.store import AgentStore, BadRow, Stored, rows_of
from node.tooling.guards.urls import UrlGuard

log = logging.getLogger(__name__)

Clock = Callable[[], float]
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50
MAX_QUERY_CHARS = 1024
"""Longest ``skill``, ``tag`` and ``q`` accepted (skill ids and tags are at most 256)."""
MAX_TOKEN_CHARS = 4096
"""Longest ``page_token`` accepted (the longest this registry issues is about 3,500)."""
MAX_PAGE_BYTES = 1024 * 1024
"""An ``include_card`` page stops early once its cards reach this many bytes of JSON (it always
holds one entry); its ``next_page_token`` continues from there."""
CARD_CACHE_BYTES = 32 * 1024 * 1024
"""Decoded cards kept for ``include_card`` pages (least recently used dropped first)."""
IMPORT_BATCHES = 4
"""Import batches one replica works on at once; another waits ``fetch_queue_s``, then 503."""
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Query:
    skill: str | None = None
    tag: str | None = None
    q: str | None = None
    healthy: bool | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str | None = None
    include_card: bool = False
    """Read each entry's card (otherwise records carry ``{}``); the page is then bounded in
    bytes (:data:`MAX_PAGE_BYTES`)."""

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


UNREADABLE_TTL_S = 2.0
"""How long a count of unreadable entries is reused when this replica has not written."""


@dataclass(frozen=True, slots=True)
class Page:
    agents: list[AgentRecord]
    next_page_token: str | None


class Registry:
    """Agents by id in the store, with TTL-based health and eviction. Memory holds only the
    heartbeats not yet written, bounded caches of cards and of entries for heartbeats
    (:class:`KnownAgents`), whatever the number of agents."""

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
        self.fetcher = CardFetcher(self._guard, settings)
        self._imports = asyncio.Semaphore(IMPORT_BATCHES)
        self._lookups: Batcher[str, Stored | None] = Batcher(self._lookup_many)
        self._registrations: Batcher[tuple[Prepared, Stored | None], tuple[AgentRecord, bool]] = (
            Batcher(self._register_batch)
        )
        self._write = asyncio.Lock()
        self._up_since = clock()
        self._last_sweep = float("-inf")
        self._known = KnownAgents(settings.known_agents)
        self._misses: Batcher[str, Stored | BadRow | None] = Batcher(self._read_many)
        self._beats = HeartbeatBatch(store, settings.heartbeat_flush, self._known)
        self._cards = CardCache(CARD_CACHE_BYTES)
        self._health = {"healthy": 0, "unhealthy": 0}
        self._unreadable_seen = (-1, 0.0, 0)  # write transactions, monotonic time, count

    async def start(self) -> None:
        """Check the stored rows not served yet (the store must be open), then write batched
        heartbeats in the background until :meth:`aclose`."""
        left = await self._store.check_unserved(partial(self.unservable, render=False))
        if left:
            log.warning("registry: %d stored entries are unreadable and left out of listings", left)
        await self.refresh_health()
        self._beats.start()

    async def aclose(self) -> None:
        """Write the heartbeats still queued; close the card fetcher's connections."""
        await self._beats.aclose()
        await self.fetcher.aclose()

    async def flush(self) -> None:
        """Write the queued heartbeats now (tests, and before a sweep)."""
        await self._beats.flush()

    @property
    def known(self) -> KnownAgents:
        """The entries this replica keeps for heartbeats (:mod:`node.registry.heartbeat_route`)."""
        return self._known

    @property
    def beats(self) -> HeartbeatBatch:
        """The heartbeats queued for the next flush (:mod:`node.registry.heartbeat_route`)."""
        return self._beats

    @property
    def write_transactions(self) -> int:
        """Write transactions this replica has made on its store (tests and benches)."""
        return self._store.write_transactions

    async def counts(self) -> tuple[int, int]:
        """How many stored entries are served, and how many are unreadable (left out)."""
        return await self._store.counts()

    # -- unreadable entries -----------------------------------------------------------------

    async def unreadable(self) -> int:
        """How many stored entries are left out because they cannot be served: counted again
        after any write of this replica, else at most every :data:`UNREADABLE_TTL_S` (every
        listing reports it; another replica's writes show within that)."""
        writes, at, count = self._unreadable_seen
        now = time.monotonic()
        if writes != self._store.write_transactions or now - at >= UNREADABLE_TTL_S:
            writes, count = self._store.write_transactions, await self._store.unserved_count()
            self._unreadable_seen = (writes, now, count)
        return count

    def unservable(self, record: AgentRecord, *, render: bool = True) -> str | None:
        """Why ``record`` cannot be served, or ``None`` when it can: today's rules for new
        entries, and its times in range; with ``render``, it is also rendered as JSON once
        (the decoded columns already guarantee that, and each read renders anyway)."""
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

    async def set_aside(self, agent_id: str, reason: str) -> None:
        """Stop serving the entry (found unservable while answering): it stays stored, counted
        as unreadable, until replaced or deleted."""
        log.warning(
            "registry entry %r is unreadable and left out of listings: %s", agent_id, reason
        )
        self._known.drop([agent_id])
        await self._store.set_aside(agent_id)

    # -- health -----------------------------------------------------------------------------

    def expires_at(self, record: AgentRecord) -> float:
        return record.last_seen + self.settings.ttl_s

    def is_healthy(self, record: AgentRecord, now: float | None = None) -> bool:
        return (self.clock() if now is None else now) - record.last_seen <= self.settings.ttl_s

    def health_counts(self) -> dict[str, int]:
        """How many agents are healthy and unhealthy (evicted ones left out), as of the last
        sweep (counted in the database then; a metric, not worth a count per scrape)."""
        return dict(self._health)

    async def refresh_health(self) -> None:
        now, s = self.clock(), self.settings
        healthy, unhealthy = await self._store.health_counts(now - s.ttl_s, self.evict_cutoff(now))
        self._health = {"healthy": healthy, "unhealthy": unhealthy}

    def evict_cutoff(self, now: float) -> float:
        """Entries last seen before this time are evicted: ``evict_after`` seconds ago, but 0
        (nothing) until this registry has been up that long. Its own downtime is no heartbeat
        missed: agents beat again within a period of its return, and a restart after a long
        outage must not empty the directory (nor make every node register again)."""
        cutoff = now - self.settings.evict_after
        return cutoff if cutoff >= self._up_since else 0.0

    def _is_evicted(self, record: AgentRecord, now: float) -> bool:
        return record.last_seen < self.evict_cutoff(now)

    def _fresh(self, record: AgentRecord) -> AgentRecord:
        """``record`` with the heartbeat this replica has queued for it, if newer."""
        queued = self._beats.queued(record.id)
        return replace(record, last_seen=queued) if queued > record.last_seen else record

    async def _holder(self, agent_id: str) -> AgentRecord | None:
        """The served entry with its card, or ``None`` (absent or unreadable)."""
        found = (await self._store.get([agent_id], with_card=True)).get(agent_id)
        return self._fresh(found.record) if isinstance(found, Stored) and found.served else None

    # -- writes -----------------------------------------------------------------------------

    async def register(self, card_url: object) -> tuple[AgentRecord, bool]:
        """Fetch and validate the card, then store it. Returns the record and whether it is new.

        The fetch waits at most ``fetch_queue_s`` for a slot (:class:`Busy`, :class:`HostBusy`);
        a card whose stored validator still matches is not parsed (a heartbeat, nothing else).
        The registrations validated meanwhile are written together (group commit), checked
        against the rows read just before under this replica's write lock."""
        url = check_card_url(card_url)
        known = await self._lookups.submit(url)
        got = await prepare(
            self.fetcher,
            url,
            stored=self._validator(known, self.clock()),
            wait_s=self.settings.fetch_queue_s,
        )
        if isinstance(got, Unchanged):
            assert known is not None
            return self._again(self._fresh(known.record), self.clock(), url), False
        return await self._registrations.submit((got, known))

    async def _lookup_many(self, urls: list[str]) -> list[Stored | None]:
        """The rows registered from ``urls``, read together for the registrations arriving
        meanwhile (one query instead of one each, and no burst of database connections)."""
        found = await self._store.by_card_url(urls)
        return [found.get(url) for url in urls]

    async def _register_batch(
        self, batch: list[tuple[Prepared, Stored | None]]
    ) -> list[tuple[AgentRecord, bool] | RegistryError]:
        """Store the registrations made meanwhile (:class:`Batcher`): their holders read in one
        query, the new and changed cards written in one transaction."""
        async with self._write:
            now = self.clock()
            holders = await self._store.get({g.info.agent_id for g, _ in batch}, with_card=True)
            records: dict[str, AgentRecord] = {}
            texts: dict[str, str | None] = {}  # the fetched bodies, stored as they came
            out: list[tuple[AgentRecord, bool] | RegistryError] = []
            for got, known in batch:
                try:
                    one = self._register_one(got, known, holders, records, now)
                except RegistryError as exc:
                    out.append(exc)
                    continue
                out.append(one)
                if records.get(got.info.agent_id) is one[0]:  # stored, not a heartbeat
                    texts[got.info.agent_id] = got.info.text
            self._known.drop(records)
            await self._store.save_many(rows_of(records.values(), texts))
        for result in out:
            if isinstance(result, tuple) and result[0].id in records:
                log.info("registered agent %s from %s", result[0].id, result[0].card_url)
        return out

    def _register_one(
        self,
        got: Prepared,
        known: Stored | None,
        holders: dict[str, Stored | BadRow],
        batch: dict[str, AgentRecord],
        now: float,
    ) -> tuple[AgentRecord, bool]:
        """One registration of a batch: the record to store (added to ``batch``) and whether it
        is new (no live entry had its card URL: ``known``), or a heartbeat when the same card is
        registered again (from any URL)."""
        info, url = got.info, got.url
        found = holders.get(info.agent_id)
        holder = batch.get(info.agent_id)  # registered earlier in this batch
        if holder is None and isinstance(found, Stored) and found.served:
            holder = self._fresh(found.record)
            if self._is_evicted(holder, now):
                holder = None
        if (
            holder is not None
            and holder.card == info.card
            and (holder.card_etag == got.validator or holder.card_url != url)
        ):
            return self._again(holder, now, url), False
        if holder is not None and holder.card_url != url:
            raise self._conflict(info.agent_id, holder.card_url)
        since = known.record if known is not None and known.served else None
        if since is not None and self._is_evicted(self._fresh(since), now):
            since = None
        if holder is not None and holder.card_url == url:
            since = holder
        record = self._record(got, since.registered_at if since else now, now)
        if (reason := self.unservable(record, render=False)) is not None:  # see _record
            raise InvalidCard(f"the card cannot be served: {reason}")
        batch[record.id] = record
        return record, since is None

    async def register_many(self, card_urls: list[object]) -> list[Outcome]:
        """Register a batch (``POST /v1/agents:import``): every URL fetched within the fetcher's
        slots (at most :data:`IMPORT_BATCHES` batches at once, so the URLs waiting for a slot
        are bounded), the new and changed cards written in one transaction, unchanged ones (by
        validator) not parsed but beaten. Each URL gets its own outcome, in order; a bad one
        costs only its own."""
        outcomes: list[Outcome | None] = [None] * len(card_urls)
        where: dict[str, list[int]] = {}  # each URL once, even if sent twice
        for i, raw in enumerate(card_urls):
            try:
                where.setdefault(check_card_url(raw), []).append(i)
            except InvalidUrl as exc:
                outcomes[i] = Outcome(raw, "error", error=exc)
        urls = list(where)
        known = await self._store.by_card_url(urls)
        now = self.clock()
        stored = {u: self._validator(k, now) for u, k in known.items()}
        try:
            async with asyncio.timeout(self.settings.fetch_queue_s):
                await self._imports.acquire()
        except TimeoutError:
            raise Busy(f"{IMPORT_BATCHES} imports are running; retry later") from None
        try:  # the batch is bounded, and so is each fetch: its URLs wait for slots in turn
            got = await prepare_all(self.fetcher, urls, stored, wait_s=None)
        finally:
            self._imports.release()
        results: dict[str, Outcome] = {}
        async with self._write:
            now = self.clock()
            ids = {g.info.agent_id for g in got if isinstance(g, Prepared)}
            holders = await self._store.get(ids)
            records: dict[str, AgentRecord] = {}
            texts: dict[str, str | None] = {}  # the fetched bodies, stored as they came
            for url, g in zip(urls, got, strict=True):
                if isinstance(g, Unchanged):
                    beaten = self._beat(self._fresh(known[url].record), now)
                    results[url] = Outcome(url, "unchanged", beaten.id)
                    continue
                try:
                    if isinstance(g, RegistryError):
                        raise g
                    record = self._import_one(g, holders, records, known.get(url), now)
                except RegistryError as exc:
                    results[url] = Outcome(url, "error", error=exc)
                    continue
                records[record.id] = record
                texts[record.id] = g.info.text
                results[url] = Outcome(url, "registered", record.id)
            self._known.drop(records)
            await self._store.save_many(rows_of(records.values(), texts))
        for url, indexes in where.items():
            for i in indexes:
                outcomes[i] = replace(results[url], card_url=card_urls[i])
        log.info("imported %d cards (%d new or changed)", len(urls), len(records))
        return [o for o in outcomes if o is not None]

    def _import_one(
        self,
        got: Prepared,
        holders: dict[str, Stored | BadRow],
        batch: dict[str, AgentRecord],
        known: Stored | None,
        now: float,
    ) -> AgentRecord:
        """The record to store for one imported card, or the error that refuses it."""
        agent_id = got.info.agent_id
        if agent_id in batch:
            raise self._conflict(agent_id, batch[agent_id].card_url)
        holder = holders.get(agent_id)
        live_holder = (
            holder.record
            if isinstance(holder, Stored) and not self._is_evicted(self._fresh(holder.record), now)
            else None
        )
        if live_holder is not None and live_holder.card_url != got.url:
            raise self._conflict(agent_id, live_holder.card_url)
        since = known.record if known is not None and known.served else None
        registered_at = (
            since.registered_at
            if since is not None and not self._is_evicted(self._fresh(since), now)
            else now
        )
        record = self._record(got, registered_at, now)
        if (reason := self.unservable(record, render=False)) is not None:
            raise InvalidCard(f"the card cannot be served: {reason}")
        return record

    @staticmethod
    def _record(got: Prepared, registered_at: float, now: float) -> AgentRecord:
        """The record of a card just validated. It is checked with ``render=False``: its card
        came from :func:`safejson.loads` and its texts from the card, so it renders as JSON
        (the times are still checked); rendering it once more cost as much as the checks."""
        info = got.info
        return AgentRecord(
            id=info.agent_id,
            card_url=got.url,
            name=info.name,
            description=info.description,
            skills=info.skills,
            card=info.card,
            registered_at=registered_at,
            last_seen=now,
            card_etag=got.validator,
        )

    def _validator(self, known: Stored | None, now: float) -> str | None:
        """The stored validator of a served, live row (``None``: fetch and parse the card)."""
        if known is None or not known.served:
            return None
        return None if self._is_evicted(self._fresh(known.record), now) else known.record.card_etag

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
        self._beats.add(record.id, now)
        return replace(record, last_seen=now)

    async def heartbeat(self, agent_id: str) -> AgentRecord:
        """Checked against the entries this replica knows (:class:`KnownAgents`), else in the
        store (an agent deleted through any replica is 404 within a flush, so its node registers
        again); the time is queued and reaches the store with the next batch."""
        now = self.clock()
        record = self._known.get(agent_id)
        if record is None or self._is_evicted(self._fresh(record), now):
            found = await self._misses.submit(agent_id)
            record = await self._checked(agent_id, found, with_card=False)
            if isinstance(found, Stored) and found.served:
                self._known.put(agent_id, found.rev, record)
        beaten = self._beat(record, now)
        self._known.touch(agent_id, beaten)
        return beaten

    async def _read_many(self, agent_ids: list[str]) -> list[Stored | BadRow | None]:
        """The rows (without cards) of the heartbeats that missed meanwhile, in one query."""
        found = await self._store.get(agent_ids)
        return [found.get(agent_id) for agent_id in agent_ids]

    async def deregister(self, agent_id: str) -> None:
        """Delete the entry; an unreadable one (see :meth:`unreadable`) is deleted too."""
        async with self._write:
            with contextlib.suppress(UnreadableEntry):
                await self._read(agent_id, with_card=False)
            self._known.drop([agent_id])
            await self._store.delete([agent_id])
            self._beats.discard(agent_id)
        log.info("deregistered agent %s", agent_id)

    async def sweep(self) -> int:
        """Delete every entry without a heartbeat for ``evict_after`` seconds (one statement, by
        the times in the store, after writing this replica's queued heartbeats; none in this
        registry's first ``evict_after`` seconds: :meth:`evict_cutoff`); return how many. On
        PostgreSQL one replica sweeps at a time and waits ``2 * heartbeat_flush_s`` longer,
        for heartbeats other replicas have queued but not yet written."""
        await self._beats.flush()
        now = self.clock()
        self._last_sweep = now
        grace = 2 * self.settings.heartbeat_flush if self._store.dialect != "sqlite" else 0
        gone = await self._store.sweep(self.evict_cutoff(now) - grace) or 0
        await self.refresh_health()
        if gone:
            log.info("evicted %d agents", gone)
        return gone

    async def maybe_sweep(self) -> None:
        """Sweep if the last sweep is older than the sweep interval (called on reads)."""
        if self.clock() - self._last_sweep >= self.settings.sweep_interval:
            await self.sweep()

    # -- reads ------------------------------------------------------------------------------

    async def get(self, agent_id: str) -> AgentRecord:
        """The entry with its card; :class:`AgentNotFound` or :class:`UnreadableEntry`."""
        return await self._read(agent_id, with_card=True)

    async def listed(self, agent_ids: Iterable[str]) -> set[str]:
        """Which of ``agent_ids`` this registry serves (one query; unreadable or evicted
        entries are not served, as :meth:`get` would say)."""
        found = await self._store.get(agent_ids)
        here: set[str] = set()
        for agent_id, row in found.items():
            with contextlib.suppress(AgentNotFound, UnreadableEntry):
                here.add((await self._checked(agent_id, row, with_card=False)).id)
        return here

    async def _read(self, agent_id: str, *, with_card: bool) -> AgentRecord:
        found = (await self._store.get([agent_id], with_card=with_card)).get(agent_id)
        return await self._checked(agent_id, found, with_card=with_card)

    async def _checked(
        self, agent_id: str, found: Stored | BadRow | None, *, with_card: bool
    ) -> AgentRecord:
        """The entry read as ``found``, or why it is not served."""
        if isinstance(found, Stored) and not found.served and not with_card:
            return await self._read(agent_id, with_card=True)  # checked with its card
        if isinstance(found, BadRow):
            raise self._unreadable(agent_id, f"cannot be decoded: {found.reason}")
        if found is None or self._is_evicted(record := self._fresh(found.record), self.clock()):
            raise AgentNotFound(f"no agent with id {agent_id[:140]!r}")
        if not found.served:  # set aside, or written behind the registry's back
            if (reason := self.unservable(record)) is not None:
                raise self._unreadable(agent_id, reason)
            await self._store.index(record)
        return record

    @staticmethod
    def _unreadable(agent_id: str, reason: str) -> UnreadableEntry:
        return UnreadableEntry(
            f"the stored entry {agent_id!r} is unreadable ({reason}); "
            "register the agent again or delete the entry"
        )

    async def search(self, query: Query) -> Page:
        """One page of matches in (casefolded name, id) order, from the store's indexes."""
        now, s = self.clock(), self.settings
        found = await self._store.search(
            Filter(
                skill=query.skill,
                tag=query.tag,
                q=query.q,
                seen_after=self.evict_cutoff(now),
                healthy=query.healthy,
                healthy_after=now - s.ttl_s,
                after=decode_token(query.page_token) if query.page_token else None,
                limit=query.page_size + 1,
            )
        )
        more = len(found) > query.page_size
        rows: list[tuple[Key, Stored]] = []
        for key, row in found[: query.page_size]:
            if isinstance(row, BadRow):
                await self.set_aside(row.id, f"cannot be decoded: {row.reason}")
            else:
                rows.append((key, replace(row, record=self._fresh(row.record))))
        if query.include_card:
            rows, cut = await self._with_cards(rows)
            more = more or cut
        return Page(
            [r.record for _, r in rows], encode_token(rows[-1][0]) if more and rows else None
        )

    async def _with_cards(
        self, rows: list[tuple[Key, Stored]]
    ) -> tuple[list[tuple[Key, Stored]], bool]:
        """``rows`` with their cards (from the cache or the store), stopping before the cards
        pass :data:`MAX_PAGE_BYTES` (never before the first); and whether it stopped early."""
        cards = {r.record.id: c for _, r in rows if (c := self._cards.get(r.record.id, r.rev))}
        missing = [r.record.id for _, r in rows if r.record.id not in cards]
        for agent_id, (rev, read) in (await self._store.cards(missing)).items():
            if isinstance(read, BadRow):
                await self.set_aside(agent_id, f"cannot be decoded: {read.reason}")
                continue
            self._cards.put(agent_id, rev, read)
            cards[agent_id] = read
        out: list[tuple[Key, Stored]] = []
        size = 0
        for key, row in rows:
            card = cards.get(row.record.id)
            if card is None:  # deleted meanwhile, or unreadable
                continue
            if out and size + card.size > MAX_PAGE_BYTES:
                return out, True
            size += card.size
            out.append((key, replace(row, record=replace(row.record, card=card.document))))
        return out, False


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
