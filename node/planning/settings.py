"""Planning settings as they appear in a card: ``planner:`` (the LLM) and ``routing:`` (plain text).

The API key is never part of the settings: ``api_key_env`` names the environment variable that
holds it, and the provider reads it at call time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_SYSTEM_PROMPT", "PlannerSettings", "RoutingSettings"]

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


class RoutingSettings(BaseModel):
    """How plain text that names no skill is handled without a model (``routing:`` in a card).

    ``default_skill`` takes every such text; otherwise the skill router ranks the public skills
    against it (BM25 over ids, descriptions, tags and examples) and runs the best one when its
    score (0–1: the share of the text's known terms it matches) reaches ``threshold`` and leads
    the runner-up by ``margin``; below that, the caller gets the best ``candidates`` to choose from.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_skill: str | None = Field(
        default=None,
        description="Skill given every plain text that names no skill (it must take exactly one "
        "required string parameter). Unset: the skill router decides.",
    )
    router: bool = Field(
        default=True, description="Route plain text to the best-matching skill (no model)."
    )
    threshold: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description="Lowest normalised score (0–1) at which the router runs its best skill "
        "(bench/RESULTS.md: precision and recall on a labelled set for several values).",
    )
    margin: float = Field(
        default=0.2,
        ge=0.0,
        lt=1.0,
        description="How far (a share of its score) the best skill must lead the runner-up.",
    )
    candidates: int = Field(
        default=3, ge=1, le=10, description="Skills offered when the router is not sure."
    )
