"""crewAI's A2A client layer: the delegation call its agents make to a remote A2A agent
(``aexecute_a2a_delegation``), with the task text and the card's skill as ``skill_id`` (crewAI
puts it in ``message.metadata``); no model, no crew."""

from __future__ import annotations

from typing import Any

from clientlib import TEXT, report


async def call(url: str) -> dict[str, Any]:
    try:
        from crewai.a2a.utils.delegation import aexecute_a2a_delegation
    except ImportError:  # crewAI before the utils package split
        from crewai.a2a.utils import aexecute_a2a_delegation  # type: ignore[no-redef]

    result = await aexecute_a2a_delegation(
        endpoint=f"{url}/.well-known/agent-card.json",
        auth=None,
        timeout=60,
        task_description=TEXT,
        skill_id="text_stats",
    )
    if result.get("error"):
        raise RuntimeError(f"{result.get('status')}: {result['error']}")
    return {"state": str(result.get("status")), "answer": [result.get("result")]}


if __name__ == "__main__":
    report("crewai", call)
