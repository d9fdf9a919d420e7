"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server, hosted APIs).

``POST {base_url}/chat/completions`` with ``messages`` (system, user, assistant with
``tool_calls``, ``tool`` messages answering them by ``tool_call_id``), ``tools`` as ``function``
definitions and ``tool_choice: "auto"``; ``Authorization: Bearer <key>`` when a key is configured.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from node.planning.providers.base import (
    AssistantMessage,
    Message,
    ModelTurn,
    SystemMessage,
    ToolResultsMessage,
    Usage,
    UserMessage,
    api_key,
    malformed,
    post_json,
)
from node.planning.settings import PlannerSettings
from node.tooling import ToolCall, ToolDefinition
from node.tooling.results import new_call_id

__all__ = ["OpenAIProvider"]


class OpenAIProvider:
    """Speaks the chat-completions wire format through a shared ``httpx.AsyncClient``."""

    def __init__(self, settings: PlannerSettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self._http = http
        self._url = f"{settings.base_url}/chat/completions"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelTurn:
        key = api_key(self.settings.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        data = await post_json(
            self._http,
            self._url,
            self.request_body(messages, tools),
            headers=headers,
            timeout=self.settings.request_timeout_s,
            secret=key,
        )
        return parse_response(data)

    def request_body(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "messages": [wire for m in messages for wire in wire_messages(m)],
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
        }
        if tools:
            body["tools"] = [wire_tool(t) for t in tools]
            body["tool_choice"] = "auto"
        return body


def wire_tool(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": definition.name,
            "description": definition.description,
            "parameters": definition.parameters,
        },
    }


def _arguments_json(arguments: Any) -> str:
    """The model's arguments as it sent them (a JSON string), or encoded when they were parsed."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps({} if arguments is None else arguments, ensure_ascii=False)


def wire_messages(message: Message) -> list[dict[str, Any]]:
    """One neutral message as chat-completions messages (tool results become one each)."""
    if isinstance(message, SystemMessage):
        return [{"role": "system", "content": message.text}]
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": message.text}]
    if isinstance(message, AssistantMessage):
        wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_json(call.arguments)},
                }
                for call in message.tool_calls
            ]
        return [wire]
    assert isinstance(message, ToolResultsMessage)
    return [
        {"role": "tool", "tool_call_id": result.call_id, "content": result.text}
        for result in message.results
    ]


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer with content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise malformed("message content is neither text nor parts")


def _tool_call(raw: Any) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        raise malformed("a tool call has no function")
    name = function.get("name")
    call_id = raw.get("id")
    return ToolCall(
        name=name if isinstance(name, str) else "",
        arguments=function.get("arguments"),
        id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
    )


def _count(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) else 0


def parse_response(data: dict[str, Any]) -> ModelTurn:
    """A chat-completions response body as a :class:`ModelTurn`."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed("no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise malformed("the first choice has no message")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise malformed("tool_calls is not a list")
    usage = data.get("usage")
    finish = choices[0].get("finish_reason")
    return ModelTurn(
        text=_text(message.get("content")),
        tool_calls=[_tool_call(raw) for raw in raw_calls],
        usage=Usage(_count(usage, "prompt_tokens"), _count(usage, "completion_tokens")),
        stop_reason=finish if isinstance(finish, str) else None,
    )
