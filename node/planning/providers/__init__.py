"""Chat model providers for the LLM planner: one wire format per module."""

from __future__ import annotations

import httpx

from node.planning.providers.anthropic import AnthropicProvider
from node.planning.providers.base import (
    AssistantMessage,
    ChatProvider,
    Message,
    ModelTurn,
    ProviderError,
    SystemMessage,
    ToolResultsMessage,
    Usage,
    UserMessage,
)
from node.planning.providers.openai import OpenAIProvider
from node.planning.settings import PlannerSettings

__all__ = [
    "AnthropicProvider",
    "AssistantMessage",
    "ChatProvider",
    "Message",
    "ModelTurn",
    "OpenAIProvider",
    "ProviderError",
    "SystemMessage",
    "ToolResultsMessage",
    "Usage",
    "UserMessage",
    "make_provider",
]


def make_provider(settings: PlannerSettings, http: httpx.AsyncClient) -> ChatProvider:
    """The provider ``settings.provider`` names, speaking through ``http``."""
    if settings.provider == "anthropic":
        return AnthropicProvider(settings, http)
    return OpenAIProvider(settings, http)
