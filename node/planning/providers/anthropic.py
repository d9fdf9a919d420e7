"""The Anthropic Messages API.

``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version: 2023-06-01``; the system
prompt is top-level, tools are ``{name, description, input_schema}``, the assistant's turns are
``text`` / ``tool_use`` blocks and tool results go back as one user message of ``tool_result``
blocks (``tool_use_id``, ``content``, ``is_error``).
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

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicProvider:
    """Speaks the Messages API through a shared ``httpx.AsyncClient``."""

    def __init__(self, settings: PlannerSettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self._http = http
        self._url = f"{settings.base_url}/v1/messages"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelTurn:
        key = api_key(self.settings.api_key_env)
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
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
        system = "\n\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        body: dict[str, Any] = {
            "model": s.model,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "messages": [wire_message(m) for m in messages if not isinstance(m, SystemMessage)],
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in tools
            ]
            body["tool_choice"] = {"type": "auto"}
        return body


def _input(arguments: Any) -> Any:
    """A ``tool_use`` input must be an object: the model's own, or the best reading of it."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def wire_message(message: Message) -> dict[str, Any]:
    """One neutral (non-system) message as a Messages API message."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.text}
    if isinstance(message, AssistantMessage):
        if not message.tool_calls:
            return {"role": "assistant", "content": message.text}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}]
        blocks = blocks if message.text else []
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
            for c in message.tool_calls
        ]
        return {"role": "assistant", "content": blocks}
    assert isinstance(message, ToolResultsMessage)
    return {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.text,
                "is_error": not r.ok,
            }
            for r in message.results
        ],
    }


def _count(usage: Any, *keys: str) -> int:
    if not isinstance(usage, dict):
        return 0
    return sum(v for k in keys if isinstance(v := usage.get(k), int))


def parse_response(data: dict[str, Any]) -> ModelTurn:
    """A Messages API response body as a :class:`ModelTurn`."""
    content = data.get("content")
    if not isinstance(content, list):
        raise malformed("no content blocks")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            calls.append(
                ToolCall(
                    name=name if isinstance(name, str) else "",
                    arguments=block.get("input"),
                    id=call_id if isinstance(call_id, str) and call_id else new_call_id(),
                )
            )
    usage = data.get("usage")
    stop = data.get("stop_reason")
    return ModelTurn(
        text="\n".join(texts),
        tool_calls=calls,
        usage=Usage(
            _count(usage, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
            _count(usage, "output_tokens"),
        ),
        stop_reason=stop if isinstance(stop, str) else None,
    )
