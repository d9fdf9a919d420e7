"""strands-agents' A2A client layer: ``strands.agent.a2a_agent.A2AAgent`` (text only)."""

from __future__ import annotations

from typing import Any

from clientlib import TEXT, report


async def call(url: str) -> dict[str, Any]:
    from strands.agent.a2a_agent import A2AAgent

    result = await A2AAgent(endpoint=url, timeout=60).invoke_async(TEXT)
    return {"state": str(result.stop_reason), "answer": [str(result)]}


if __name__ == "__main__":
    report("strands-agents", call)
