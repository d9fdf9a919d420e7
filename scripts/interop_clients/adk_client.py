"""google-adk's A2A client layer: a RemoteA2aAgent run by an InMemoryRunner (no model anywhere:
the remote agent is the only agent), given the user's text as ADK delivers it."""

from __future__ import annotations

from typing import Any

from clientlib import TEXT, report


async def call(url: str) -> dict[str, Any]:
    from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = RemoteA2aAgent(name="text_node", agent_card=f"{url}/.well-known/agent-card.json")
    runner = InMemoryRunner(agent=agent, app_name="interop")
    session = await runner.session_service.create_session(app_name="interop", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=TEXT)])
    texts: list[str] = []
    errors: list[str] = []
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message):
        if event.error_message:
            errors.append(f"{event.error_code}: {event.error_message}")
        for part in (event.content.parts if event.content else None) or []:
            if part.text:
                texts.append(part.text)
    await runner.close()
    if errors:
        raise RuntimeError("; ".join(errors))
    return {"state": "completed" if texts else "no answer", "answer": texts[-1:]}


if __name__ == "__main__":
    report("google-adk", call)
