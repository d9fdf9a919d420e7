"""beeai-framework's A2A client layer: ``beeai_framework.adapters.a2a.agents.A2AAgent`` (text)."""

from __future__ import annotations

from typing import Any

from clientlib import TEXT, report


async def call(url: str) -> dict[str, Any]:
    from beeai_framework.adapters.a2a.agents import A2AAgent
    from beeai_framework.memory import UnconstrainedMemory

    agent = A2AAgent(url=url, memory=UnconstrainedMemory())
    output = await agent.run(TEXT)
    event = output.event
    task = event[0] if isinstance(event, tuple) else None
    state = task.status.state.value if task is not None else "message"
    return {"state": state, "answer": [m.text for m in output.output]}


if __name__ == "__main__":
    report("beeai-framework", call)
