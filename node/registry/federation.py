"""Federation: upstream registries complete a search this registry cannot satisfy alone.

A listing is *federated* on its last local page (no local ``next_page_token``) when that page
holds fewer entries than asked, or always with ``scope=federated``; never with ``scope=local``.
Every upstream (``settings.federation.upstreams``) is then asked, concurrently, through the SSRF
guard and with its own bearer token, for the same filters (at most ``max_results`` entries each).
Their entries form the listing's *tail*: deduplicated by agent id and card URL (an agent listed
here wins, looked up once per set of answers; then the earlier upstream wins), each marked
``"registry": <base URL of the registry that holds it>`` (kept when an upstream already marked
it), filling the free places of the last local page and continuing on pages whose token is
``fed.<offset>``. Each upstream's answer, or failure, to one query is cached for ``cache_s`` (at
most ``cache_entries`` answers; concurrent misses share one request), so paging the tail and
polling cost the upstreams little (an agent registered here meanwhile may show twice that long).

Hops follow :mod:`node.peers.hops`: a forwarded search carries the header :data:`HOP_HEADER`,
JSON ``{"chain": [registry instance ids], "max_hops": n, "deadline": epoch_s}``. A registry that
finds its own id in the chain (a loop), a full chain, or a passed deadline answers with its local
entries only (``not_forwarded`` says why; such a partial answer is not cached upstream). It waits
for its upstreams at most ``timeout_s`` (less when the caller's deadline is nearer) and passes on
four fifths of that time, so every hop keeps time to answer. A page that consulted the upstreams
says how each fared (``"federation"`` member, one short line each); failures are never raised.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode
from uuid import uuid4

import httpx

from node.errors import GuardError, HopLimitExceeded, ToolError
from node.peers.hops import HopState, check_hop, read_hop, remaining
from node.peers.registry_client import bearer, entry_problem
from node.protocol import HOP
from node.registry import safejson
from node.registry.errors import BadRequest
from node.registry.settings import FederationSettings, Upstream
from node.tooling.guards.urls import UrlGuard

__all__ = ["HOP_HEADER", "SCOPES", "TOKEN_PREFIX", "Federation", "Tail"]

log = logging.getLogger(__name__)

HOP_HEADER = "A2A-Node-Hop"
TOKEN_PREFIX = "fed."
SCOPES = ("local", "federated")
UPSTREAM_PAGE_SIZE = 200  # the registry's MAX_PAGE_SIZE
_MIN_BUDGET_S = 0.05
_PASS_ON = 0.8
_MAX_ERROR_CHARS = 200
_MAX_UPSTREAM_PAGES = 20
_MAX_HEADER_CHARS = 4096

Filters = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Answer:
    entries: tuple[dict[str, Any], ...]
    error: str | None
    partial: bool = False  # the upstream did not forward (loop, hop limit): not cached


@dataclass(frozen=True, slots=True)
class Tail:
    """What federation adds to one page: entries (JSON), the next token, the report (JSON)."""

    entries: list[bytes]
    next_page_token: str | None
    report: bytes


class _TtlCache:
    """At most ``size`` answers, each for ``ttl_s`` seconds; the oldest goes first."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._items: OrderedDict[tuple[str, Filters], tuple[float, _Answer]] = OrderedDict()

    def get(self, key: tuple[str, Filters], now: float) -> _Answer | None:
        item = self._items.get(key)
        if item is None or item[0] <= now:
            return None
        return item[1]

    def put(self, key: tuple[str, Filters], answer: _Answer, now: float) -> None:
        if self.ttl_s <= 0:
            return
        self._items.pop(key, None)
        self._items[key] = (now + self.ttl_s, answer)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


class Federation:
    """Asks the upstream registries and pages through what they answer."""

    def __init__(
        self,
        settings: FederationSettings,
        http: Callable[[], httpx.AsyncClient],
        allow_cidrs: tuple[str, ...] = (),
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``allow_cidrs``: private networks the upstreams may be on (as for card fetches)."""
        self.settings = settings
        self.id = uuid4().hex[:16]  # this registry instance, in hop chains
        self._http = http
        self._guard = UrlGuard(allow_cidrs=list(allow_cidrs))
        self._monotonic = monotonic
        self._cache = _TtlCache(settings.cache_entries, settings.cache_s)
        self._inflight: dict[tuple[str, Filters], asyncio.Task[_Answer]] = {}
        self._failing: set[str] = set()  # upstream URLs whose last answer was a failure
        self._merges: OrderedDict[Filters, tuple[tuple[_Answer, ...], list[dict[str, Any]]]]
        self._merges = OrderedDict()

    @staticmethod
    def tail_offset(page_token: str | None) -> int | None:
        """The tail offset a ``fed.<n>`` token names; ``None`` for a local token (or none)."""
        if page_token is None or not page_token.startswith(TOKEN_PREFIX):
            return None
        digits = page_token.removeprefix(TOKEN_PREFIX)
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 9):
            raise BadRequest("page_token: a federation token is fed.<offset>")
        return int(digits)

    @staticmethod
    def check_scope(scope: str | None) -> str | None:
        if scope not in (None, "", *SCOPES):
            raise BadRequest(f"scope must be one of {list(SCOPES)}")
        return scope or None

    def wanted(
        self,
        scope: str | None,
        *,
        offset: int | None,
        local: int,
        next_token: str | None,
        page_size: int,
    ) -> bool:
        """Whether this page gets a federated tail (see the module docstring)."""
        if not self.settings.upstreams or scope == "local":
            return False
        if offset is not None:
            return True
        return next_token is None and (scope == "federated" or local < page_size)

    async def tail(
        self,
        filters: Mapping[str, str],
        *,
        hop_header: str | None,
        free: int,
        offset: int,
        listed_here: Callable[[list[str]], Awaitable[set[str]]],
        local_card_urls: set[str],
    ) -> Tail:
        """Up to ``free`` upstream entries from ``offset`` on, none listed here already."""
        hop = self._read_hop(hop_header)
        now = time.time()
        try:
            check_hop(hop, self.id, now)
            budget = min(self.settings.timeout_s, remaining(hop, now))
            if budget < _MIN_BUDGET_S:
                raise HopLimitExceeded(f"deadline too close ({budget:.2f} s left)")
        except HopLimitExceeded as exc:
            return Tail([], None, _report([], not_forwarded=str(exc)[:_MAX_ERROR_CHARS]))
        if free <= 0:  # a full last page: the tail starts on the next one
            return Tail([], f"{TOKEN_PREFIX}{offset}", _report([]))
        key: Filters = tuple(sorted(filters.items()))
        forward = {
            "chain": [*hop.chain, self.id],
            "max_hops": hop.max_hops,
            "deadline": now + _PASS_ON * budget,
        }
        answers = await asyncio.gather(
            *(self._answer(u, key, forward, budget) for u in self.settings.upstreams)
        )
        merged = await self._merged(key, tuple(a for a, _ in answers), listed_here)
        out: list[bytes] = []
        i = offset
        while i < len(merged) and len(out) < free:
            entry = merged[i]
            i += 1
            if entry.get("card_url") not in local_card_urls:
                out.append(safejson.dumps(entry))
        rows = [
            {"url": u.url, "agents": len(a.entries), "cached": cached, "error": a.error}
            for u, (a, cached) in zip(self.settings.upstreams, answers, strict=True)
        ]
        return Tail(out, f"{TOKEN_PREFIX}{i}" if i < len(merged) else None, _report(rows))

    async def _merged(
        self,
        key: Filters,
        answers: tuple[_Answer, ...],
        listed_here: Callable[[list[str]], Awaitable[set[str]]],
    ) -> list[dict[str, Any]]:
        """The answers merged, without the agents listed here; kept as long as the answers
        are (so a cached answer costs no lookups here)."""
        held = self._merges.get(key)
        if held is not None and all(a is b for a, b in zip(held[0], answers, strict=True)):
            return held[1]
        merged = _merge(a.entries for a in answers)
        here = await listed_here([entry["id"] for entry in merged])
        tail = [entry for entry in merged if entry["id"] not in here]
        self._merges.pop(key, None)
        self._merges[key] = (answers, tail)
        while len(self._merges) > self.settings.cache_entries:
            self._merges.popitem(last=False)
        return tail

    def _read_hop(self, header: str | None) -> HopState:
        limit = self.settings.max_hops
        if not header:
            return HopState((), limit, None)
        try:
            if len(header) > _MAX_HEADER_CHARS:
                raise safejson.UnsafeJson(f"longer than {_MAX_HEADER_CHARS} characters")
            return read_hop({HOP: safejson.loads(header.encode())}, default_max_hops=limit)
        except (safejson.UnsafeJson, HopLimitExceeded) as exc:
            raise BadRequest(f"header {HOP_HEADER}: {exc}") from exc

    async def _answer(
        self, upstream: Upstream, filters: Filters, hop: dict[str, Any], budget: float
    ) -> tuple[_Answer, bool]:
        """The upstream's answer and whether it came from the cache."""
        key = (upstream.url, filters)
        cached = self._cache.get(key, self._monotonic())
        if cached is not None:
            return cached, True
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._ask(upstream, dict(filters), hop, budget))
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._done(key, t))
        return await asyncio.shield(task), False

    def _done(self, key: tuple[str, Filters], task: asyncio.Task[_Answer]) -> None:
        self._inflight.pop(key, None)
        if not task.cancelled() and task.exception() is None and not task.result().partial:
            self._cache.put(key, task.result(), self._monotonic())

    async def _ask(
        self, upstream: Upstream, filters: dict[str, str], hop: dict[str, Any], budget: float
    ) -> _Answer:
        """Read up to ``max_results`` entries from ``upstream`` within ``budget`` seconds."""
        limit = self.settings.max_results
        params = {**filters, "page_size": str(min(UPSTREAM_PAGE_SIZE, limit))}
        token = upstream.token.get_secret_value() if upstream.token else None
        headers = {"Accept": "application/json", HOP_HEADER: json.dumps(hop), **bearer(token)}
        entries: list[dict[str, Any]] = []
        partial: list[bool] = []
        error: str | None = None
        try:
            async with asyncio.timeout(budget):
                for _ in range(_MAX_UPSTREAM_PAGES):  # pages may be short (bounded in bytes)
                    before = len(entries)
                    next_token = await self._page(
                        upstream, params, headers, entries, partial, budget
                    )
                    if next_token is None or len(entries) >= limit or len(entries) == before:
                        break
                    params["page_token"] = next_token
        except TimeoutError:
            error = f"no complete answer within {budget:.2f} s"
        except (GuardError, ToolError, safejson.UnsafeJson, _BadAnswer) as exc:
            error = str(exc)
        if error is not None:
            error = error[:_MAX_ERROR_CHARS]
            if upstream.url not in self._failing:  # logged when it starts failing, not per query
                self._failing.add(upstream.url)
                log.warning("upstream registry %s fails: %s", upstream.url, error)
        elif upstream.url in self._failing:
            self._failing.discard(upstream.url)
            log.info("upstream registry %s answers again", upstream.url)
        return _Answer(tuple(entries[:limit]), error, any(partial))

    async def _page(
        self,
        upstream: Upstream,
        params: dict[str, str],
        headers: dict[str, str],
        entries: list[dict[str, Any]],
        partial: list[bool],
        budget: float,
    ) -> str | None:
        """Read one page into ``entries`` (whether it was forwarded into ``partial``); its next
        page token."""
        url = f"{upstream.url}/v1/agents?{urlencode(params)}"
        response = await self._guard.fetch(
            self._http(),
            "GET",
            url,
            headers=headers,
            timeout=budget,
            max_bytes=self.settings.max_answer_bytes,
        )
        if response.status_code != 200:
            raise _BadAnswer(f"HTTP {response.status_code} from {upstream.url}")
        body = safejson.loads(response.content)
        if not isinstance(body, dict) or not isinstance(body.get("agents"), list):
            raise _BadAnswer(f"{upstream.url} answered without an 'agents' list")
        for entry in body["agents"]:
            if entry_problem(entry) is None:
                if not isinstance(entry.get("registry"), str):
                    entry["registry"] = upstream.url
                entries.append(entry)
        report = body.get("federation")
        partial.append(isinstance(report, dict) and report.get("not_forwarded") is not None)
        token = body.get("next_page_token")
        return token if isinstance(token, str) and token else None


class _BadAnswer(Exception):
    """An upstream answered, but not with a listing."""


def _merge(answers: Iterable[tuple[dict[str, Any], ...]]) -> list[dict[str, Any]]:
    """Entries of every answer in order, the first of each agent id and card URL kept."""
    ids: set[str] = set()
    urls: set[str] = set()
    out: list[dict[str, Any]] = []
    for entries in answers:
        for entry in entries:
            url = entry.get("card_url")
            if entry["id"] in ids or (isinstance(url, str) and url in urls):
                continue
            ids.add(entry["id"])
            if isinstance(url, str):
                urls.add(url)
            out.append(entry)
    return out


def _report(rows: list[dict[str, Any]], *, not_forwarded: str | None = None) -> bytes:
    return safejson.dumps({"upstreams": rows, "not_forwarded": not_forwarded})
