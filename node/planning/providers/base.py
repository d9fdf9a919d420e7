"""The provider contract: a neutral conversation in, one model turn out.

Providers translate :data:`Message` lists and :class:`ToolDefinition` s to their wire format, POST
them with the shared ``httpx.AsyncClient``, and translate the answer back to a :class:`ModelTurn`.
Every failure (transport, non-2xx, malformed body, missing key) is a :class:`ProviderError`, whose
text is bounded and never contains the API key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from node.errors import PlanningError
from node.tooling import ToolCall, ToolDefinition, ToolResult

__all__ = [
    "AssistantMessage",
    "ChatProvider",
    "Message",
    "ModelTurn",
    "ProviderError",
    "SystemMessage",
    "ToolResultsMessage",
    "Usage",
    "UserMessage",
    "api_key",
    "post_json",
]

_MAX_DETAIL = 300  # characters of a server's error text kept in a ProviderError


class ProviderError(PlanningError):
    """The model endpoint could not be reached, refused the request or answered nonsense."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens spent by one or more model requests."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class SystemMessage:
    text: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    text: str


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model said: text, tool calls (ids and raw arguments as the model sent them)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResultsMessage:
    """The results of one assistant turn's tool calls, in call order (``call_id`` = call id)."""

    results: tuple[ToolResult, ...]


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultsMessage


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """One model response: its text, the tool calls it asks for, usage and why it stopped."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    stop_reason: str | None = None


class ChatProvider(Protocol):
    """A chat model behind some wire format."""

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelTurn: ...


def api_key(env_name: str | None) -> str | None:
    """The key in ``$env_name``, read now (``None`` when no variable is configured)."""
    if env_name is None:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise ProviderError(f"the API key variable {env_name} is not set")
    return key


def _bounded(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "…"


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    if not isinstance(body, dict):
        return response.text
    error = body.get("error")
    for message in (
        error.get("message") if isinstance(error, dict) else error,
        body.get("message"),
    ):
        if isinstance(message, str):
            return message
    return response.text


async def post_json(
    http: httpx.AsyncClient,
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    timeout: float,
    secret: str | None,
) -> dict[str, Any]:
    """POST ``body``; the JSON object answered, or :class:`ProviderError` (``secret`` redacted)."""
    try:
        response = await http.post(url, json=body, headers=dict(headers), timeout=timeout)
    except httpx.TimeoutException as exc:
        raise ProviderError(f"the model request timed out after {timeout:g} s") from exc
    except httpx.HTTPError as exc:
        detail = _bounded(f"{type(exc).__name__}: {exc}", secret)
        raise ProviderError(f"cannot reach the model endpoint ({detail})") from exc
    if not response.is_success:
        detail = _bounded(_error_detail(response), secret)
        raise ProviderError(f"the model endpoint answered {response.status_code}: {detail}")
    try:
        data = response.json()
    except ValueError as exc:
        raise ProviderError("the model endpoint answered with a body that is not JSON") from exc
    if not isinstance(data, dict):
        raise ProviderError("the model endpoint answered with JSON that is not an object")
    return data


def malformed(what: str) -> ProviderError:
    """The error for a 2xx body that lacks what the wire format promises."""
    return ProviderError(f"malformed model response: {what}")
