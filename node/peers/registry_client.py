"""Reading the registry: its agents (by default the healthy ones, with their cards), every page.

Contract: ``GET {registry}/v1/agents?healthy=true&include_card=true&page_size=&page_token=``
(optionally ``skill=``, ``tag=``, ``q=``) →
``{"agents": [{"id", "name", "card_url", "card": {...}, "skills": [...], "healthy"}, ...],
"next_page_token": str | null}``; a bearer token is sent when one is configured. A
:class:`RegistryReader` remembers each page's ``ETag`` and sends it back (``If-None-Match``), so a
poll of an unchanged listing costs the registry a hash and the node nothing (``304``, no parse).

A registry is data from elsewhere: an answer that is not JSON (or nests too deep to parse) is a
:class:`RegistryError`, but one malformed entry in an otherwise good answer is left out (and
reported through ``skipped``), never a reason to lose the others.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from node.errors import RegistryError

__all__ = [
    "MAX_PAGES",
    "Listing",
    "RegistryReader",
    "bearer",
    "entry_problem",
    "search_agents",
]

MAX_PAGES = 100  # a registry that never stops paging is cut off here


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def entry_problem(entry: object) -> str | None:
    """Why ``entry`` does not have the contract's shape, or ``None`` when it does."""
    if not isinstance(entry, dict):
        return f"an entry is a {type(entry).__name__}, not an object"
    if not isinstance(entry.get("id"), str) or not entry["id"]:
        return "an entry has no string id"
    skills = entry.get("skills", [])
    if not isinstance(skills, list) or not all(isinstance(s, dict) for s in skills):
        return f"entry {entry['id'][:100]!r} has a skills field that is not a list of objects"
    return None


@dataclass(frozen=True, slots=True)
class _Page:
    etag: str
    agents: list[dict[str, Any]]
    skipped: list[str]
    next_token: str | None


@dataclass(frozen=True, slots=True)
class Listing:
    """A registry's agents; ``changed`` is False when every page answered 304 Not Modified."""

    agents: list[dict[str, Any]]
    changed: bool


class RegistryReader:
    """Reads one registry's listing page by page, revalidating the pages of its last read with
    their ETags (``If-None-Match``): a page that answers 304 is reused as it was, not parsed."""

    def __init__(self, http: httpx.AsyncClient, registry_url: str, *, timeout_s: float = 5.0):
        self._http, self._timeout = http, timeout_s
        self.url = registry_url.rstrip("/") + "/v1/agents"
        self._pages: dict[tuple[tuple[str, str | int], ...], _Page] = {}

    def forget(self) -> None:
        """Drop the remembered pages (the next read parses every page)."""
        self._pages = {}

    async def read(
        self,
        *,
        token: str | None = None,
        skill: str | None = None,
        tag: str | None = None,
        q: str | None = None,
        healthy_only: bool = True,
        include_card: bool = True,
        page_size: int = 100,
        skipped: list[str] | None = None,
    ) -> Listing:
        """Every page of the listing (see :func:`search_agents` for the arguments)."""
        params: dict[str, str | int] = {"page_size": page_size}
        if healthy_only:
            params["healthy"] = "true"
        if include_card:
            params["include_card"] = "true"
        params |= {k: v for k, v in {"skill": skill, "tag": tag, "q": q}.items() if v is not None}
        agents: list[dict[str, Any]] = []
        seen: dict[tuple[tuple[str, str | int], ...], _Page] = {}
        changed = False
        for _ in range(MAX_PAGES):
            key = tuple(sorted(params.items()))
            page = await self._page(params, token, self._pages.get(key))
            changed = changed or page is not self._pages.get(key)
            if page.etag:
                seen[key] = page
            agents += page.agents
            if skipped is not None:
                skipped += page.skipped
            if not page.next_token:
                self._pages = seen
                return Listing(agents, changed)
            params["page_token"] = page.next_token
        raise RegistryError(f"{self.url} returned more than {MAX_PAGES} pages")

    async def _page(
        self, params: dict[str, str | int], token: str | None, known: _Page | None
    ) -> _Page:
        headers = bearer(token) | ({"If-None-Match": known.etag} if known else {})
        try:
            response = await self._http.get(
                self.url, params=params, headers=headers, timeout=self._timeout
            )
            if response.status_code == 304 and known is not None:
                return known
            response.raise_for_status()
            body = json.loads(response.content)
        except (httpx.HTTPError, ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]
            raise RegistryError(f"cannot list agents at {self.url}: {reason}") from exc
        if not isinstance(body, dict) or not isinstance(body.get("agents"), list):
            raise RegistryError(f"unexpected answer from {self.url}: no 'agents' list")
        agents: list[dict[str, Any]] = []
        problems: list[str] = []
        for entry in body["agents"]:
            problem = entry_problem(entry)
            if problem is None:
                agents.append(entry)
            else:
                problems.append(problem)
        next_token = body.get("next_page_token")
        etag = response.headers.get("ETag", "")
        return _Page(etag, agents, problems, str(next_token) if next_token else None)


async def search_agents(
    http: httpx.AsyncClient,
    registry_url: str,
    *,
    token: str | None = None,
    skill: str | None = None,
    tag: str | None = None,
    q: str | None = None,
    healthy_only: bool = True,
    include_card: bool = True,
    page_size: int = 100,
    timeout_s: float = 5.0,
    skipped: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The agents the registry lists; :class:`RegistryError` when it cannot be read.

    ``skill``, ``tag`` and ``q`` (free text) narrow the search; ``healthy_only=False`` lists the
    unhealthy ones too. Entries without the contract's shape (see :func:`entry_problem`) are left
    out; why is appended to ``skipped`` when given. (A poller keeps a :class:`RegistryReader`.)
    """
    reader = RegistryReader(http, registry_url, timeout_s=timeout_s)
    listing = await reader.read(
        token=token,
        skill=skill,
        tag=tag,
        q=q,
        healthy_only=healthy_only,
        include_card=include_card,
        page_size=page_size,
        skipped=skipped,
    )
    return listing.agents
