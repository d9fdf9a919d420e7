"""Reading the registry: its agents (by default the healthy ones, with their cards), every page.

Contract: ``GET {registry}/v1/agents?healthy=true&include_card=true&page_size=&page_token=``
(optionally ``skill=``, ``tag=``, ``q=``) →
``{"agents": [{"id", "name", "card_url", "card": {...}, "skills": [...], "healthy"}, ...],
"next_page_token": str | null}``; a bearer token is sent when one is configured.

A registry is data from elsewhere: an answer that is not JSON (or nests too deep to parse) is a
:class:`RegistryError`, but one malformed entry in an otherwise good answer is left out (and
reported through ``skipped``), never a reason to lose the others.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from node.errors import RegistryError

__all__ = ["MAX_PAGES", "bearer", "entry_problem", "search_agents"]

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
    out; why is appended to ``skipped`` when given.
    """
    url = registry_url.rstrip("/") + "/v1/agents"
    params: dict[str, str | int] = {"page_size": page_size}
    if healthy_only:
        params["healthy"] = "true"
    if include_card:
        params["include_card"] = "true"
    params |= {k: v for k, v in {"skill": skill, "tag": tag, "q": q}.items() if v is not None}
    agents: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        try:
            response = await http.get(url, params=params, headers=bearer(token), timeout=timeout_s)
            response.raise_for_status()
            body = json.loads(response.content)
        except (httpx.HTTPError, ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]
            raise RegistryError(f"cannot list agents at {url}: {reason}") from exc
        if not isinstance(body, dict) or not isinstance(body.get("agents"), list):
            raise RegistryError(f"unexpected answer from {url}: no 'agents' list")
        for entry in body["agents"]:
            problem = entry_problem(entry)
            if problem is None:
                agents.append(entry)
            elif skipped is not None:
                skipped.append(problem)
        next_token = body.get("next_page_token")
        if not next_token:
            return agents
        params["page_token"] = str(next_token)
    raise RegistryError(f"{url} returned more than {MAX_PAGES} pages")
