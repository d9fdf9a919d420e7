"""Reading the registry: healthy agents with their cards, every page (bounded).

Contract: ``GET {registry}/v1/agents?healthy=true&include_card=true&page_size=&page_token=`` →
``{"agents": [{"id", "name", "card_url", "card": {...}, "skills": [...], "healthy"}, ...],
"next_page_token": str | null}``; a bearer token is sent when one is configured.
"""

from __future__ import annotations

from typing import Any

import httpx

from node.errors import RegistryError

__all__ = ["MAX_PAGES", "bearer", "search_agents"]

MAX_PAGES = 100  # a registry that never stops paging is cut off here


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


async def search_agents(
    http: httpx.AsyncClient,
    registry_url: str,
    *,
    token: str | None = None,
    page_size: int = 100,
    timeout_s: float = 5.0,
) -> list[dict[str, Any]]:
    """All healthy agents the registry lists; :class:`RegistryError` when it cannot be read."""
    url = registry_url.rstrip("/") + "/v1/agents"
    params: dict[str, str | int] = {
        "healthy": "true",
        "include_card": "true",
        "page_size": page_size,
    }
    agents: list[dict[str, Any]] = []
    for _ in range(MAX_PAGES):
        try:
            response = await http.get(url, params=params, headers=bearer(token), timeout=timeout_s)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RegistryError(f"cannot list agents at {url}: {exc}") from exc
        if not isinstance(body, dict) or not isinstance(body.get("agents"), list):
            raise RegistryError(f"unexpected answer from {url}: no 'agents' list")
        agents.extend(a for a in body["agents"] if isinstance(a, dict))
        next_token = body.get("next_page_token")
        if not next_token:
            return agents
        params["page_token"] = str(next_token)
    raise RegistryError(f"{url} returned more than {MAX_PAGES} pages")
