"""The Anthropic provider's exact wire shapes, as the scripted server received them."""

from __future__ import annotations

import httpx
import pytest

from node.planning.llm import LLMPlanner
from node.tooling import Toolbox, ToolContext, ToolRunner, tool
from tests.planning.planning_support import KEY, KEY_ENV, AnthropicDialect, Model

pytestmark = pytest.mark.asyncio(loop_scope="module")
anthropic = AnthropicDialect()


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_request_shapes(
    model: Model, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    scripted, url = model
    scripted.then(
        anthropic.reply(
            "Adding.", calls=[("toolu_1", "add", {"a": 2, "b": 3}), ("toolu_2", "add", {"a": 1})]
        ),
        anthropic.reply("5"),
    )
    registry = Toolbox([add])
    settings = anthropic.settings(
        url, api_key_env=KEY_ENV, system_prompt="Be brief.", max_tokens=99
    )
    planner = LLMPlanner.from_settings(settings, http)

    outcome = await planner.run("add 2 and 3", registry, ToolRunner(registry), ToolContext())

    assert outcome.answer == "5"
    first, second = scripted.requests
    assert first.path == "/v1/messages"
    assert first.headers["x-api-key"] == KEY
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in first.headers
    assert first.body == {
        "model": "scripted",
        "max_tokens": 99,
        "temperature": 0.0,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "add 2 and 3"}],
        "tools": [
            {
                "name": "add",
                "description": "Add two integers.",
                "input_schema": registry.definitions()[0].parameters,
            }
        ],
        "tool_choice": {"type": "auto"},
    }
    assert second.body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
                {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "5",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": outcome.results[1].text,
                    "is_error": True,
                },
            ],
        },
    ]
    assert outcome.results[1].text.startswith("error (invalid_arguments)")


async def test_no_key_header_without_a_key(model: Model, http: httpx.AsyncClient):
    scripted, url = model
    scripted.then(anthropic.reply("hi"))
    registry = Toolbox([add])
    planner = LLMPlanner.from_settings(anthropic.settings(url), http)
    await planner.run("hi", registry, ToolRunner(registry), ToolContext())
    assert "x-api-key" not in scripted.requests[0].headers
