"""The LLM planner's settings, as they appear under ``planner:`` in a card.

The API key is never part of the settings: ``api_key_env`` names the environment variable that
holds it, and the provider reads it at call time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_SYSTEM_PROMPT", "PlannerSettings"]

DEFAULT_SYSTEM_PROMPT = (
    "You are the planner of an agent node. Answer the user's request, calling the available "
    "tools when they help. Call tools only with arguments that match their schemas; when a tool "
    "returns an error, read it and correct the call or explain why the request cannot be done. "
    "When you have what you need, answer plainly and concisely without calling more tools."
)


class PlannerSettings(BaseModel):
    """Which model to ask, how, and the hard limits of one planning loop."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["openai", "anthropic"] = Field(
        description="'openai': any OpenAI-compatible chat-completions server (vLLM, Ollama, "
        "llama.cpp server, hosted APIs); 'anthropic': the Anthropic Messages API."
    )
    base_url: str = Field(
        description="e.g. http://127.0.0.1:11434/v1 (openai) or https://api.anthropic.com"
    )
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Name of the environment variable holding the API key (never the key).",
    )
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_steps: int = Field(default=8, ge=1, description="Model round trips per task.")
    max_tool_calls: int = Field(default=16, ge=0)
    timeout_s: float = Field(default=120.0, gt=0, description="Wall time of the whole loop.")
    request_timeout_s: float = Field(default=60.0, gt=0)
    max_tokens: int = Field(default=1024, ge=1)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    cost_per_1k_input_tokens: float = Field(default=0.0, ge=0.0)
    cost_per_1k_output_tokens: float = Field(default=0.0, ge=0.0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/")

    def cost_of(self, input_tokens: int, output_tokens: int) -> float:
        """What a model request with this usage costs."""
        return (
            input_tokens * self.cost_per_1k_input_tokens
            + output_tokens * self.cost_per_1k_output_tokens
        ) / 1000
