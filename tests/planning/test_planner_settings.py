"""PlannerSettings: what a card's ``planner:`` section may say."""

from __future__ import annotations

import pydantic
import pytest

from node.planning.settings import DEFAULT_SYSTEM_PROMPT, PlannerSettings


def test_defaults() -> None:
    s = PlannerSettings(provider="openai", base_url="http://127.0.0.1:11434/v1/", model="qwen3")
    assert s.base_url == "http://127.0.0.1:11434/v1"
    assert s.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert (s.max_steps, s.max_tool_calls, s.timeout_s, s.request_timeout_s) == (8, 16, 120, 60)
    assert (s.max_tokens, s.temperature, s.api_key_env) == (1024, 0.0, None)
    assert s.cost_of(10_000, 10_000) == 0.0


def test_cost_of_usage() -> None:
    s = PlannerSettings(
        provider="anthropic",
        base_url="https://api.anthropic.com",
        model="m",
        cost_per_1k_input_tokens=0.5,
        cost_per_1k_output_tokens=2.0,
    )
    assert s.cost_of(2000, 500) == pytest.approx(2.0)


@pytest.mark.parametrize(
    "change",
    [
        {"provider": "cohere"},
        {"base_url": "ftp://model"},
        {"base_url": "127.0.0.1:8000"},
        {"model": ""},
        {"api_key_env": "sk-live-1234"},  # a key pasted where its variable's name belongs
        {"api_key": "sk-live-1234"},  # keys never live in the card
        {"max_steps": 0},
        {"max_tool_calls": -1},
        {"timeout_s": 0},
        {"temperature": 3},
        {"cost_per_1k_input_tokens": -1},
    ],
)
def test_invalid_settings_are_refused(change: dict[str, object]) -> None:
    fields: dict[str, object] = {"provider": "openai", "base_url": "http://x/v1", "model": "m"}
    with pytest.raises(pydantic.ValidationError):
        PlannerSettings.model_validate(fields | change)


def test_settings_are_frozen_and_publish_a_schema() -> None:
    s = PlannerSettings(provider="openai", base_url="http://x/v1", model="m", api_key_env="KEY")
    with pytest.raises(pydantic.ValidationError):
        s.max_steps = 99  # type: ignore[misc]
    schema = PlannerSettings.model_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"provider", "base_url", "model"}
