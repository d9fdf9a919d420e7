"""Plain a2a-sdk (0.3 or 1.x, whichever this venv has), as its docs show: 0.3 sends plain text;
1.x sends text with ``message.metadata.skill`` (the case issue 9's table found refused)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from clientlib import TEXT, report


async def call_0_3(url: str) -> dict[str, Any]:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, TextPart

    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        message = Message(
            role=Role.user, parts=[Part(root=TextPart(text=TEXT))], message_id=uuid.uuid4().hex
        )
        last: Any = None
        async for event in client.send_message(message):
            last = event if isinstance(event, Message) else event[0]
    return _summary(last.model_dump(mode="json", exclude_none=True))


async def call_1_x(url: str) -> dict[str, Any]:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest
    from google.protobuf.json_format import MessageToDict

    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        message = Message(role=Role.ROLE_USER, parts=[Part(text=TEXT)], message_id=uuid.uuid4().hex)
        message.metadata.update({"skill": "summarize"})
        task_id, reply = "", None
        async for event in client.send_message(SendMessageRequest(message=message)):
            payload = MessageToDict(event)  # streamed: task, status and artifact updates
            task_id = task_id or next(
                (v.get("taskId", v.get("id", "")) for v in payload.values()), ""
            )
            reply = payload.get("message", reply)
        if task_id:  # the task as it ended
            reply = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
    return _summary(reply or {})


def _summary(reply: dict[str, Any]) -> dict[str, Any]:
    """State and answer text of a Task or Message in JSON (0.3 or 1.0 shapes)."""
    state = reply.get("status", {}).get("state", "message")
    parts = [p for a in reply.get("artifacts", []) for p in a.get("parts", [])]
    parts = (
        parts
        or reply.get("parts", [])
        or reply.get("status", {}).get("message", {}).get("parts", [])
    )
    answer = [p.get("text", p.get("data")) for p in parts]
    return {"state": str(state), "answer": answer}


if __name__ == "__main__":
    from importlib.metadata import version

    major = version("a2a-sdk").split(".")[0]
    report("a2a-sdk", call_0_3 if major == "0" else call_1_x)
