"""The OpenAI-compatible provider's exact wire shapes, as the scripted server received them."""

from __future__ import annotations

import httpx
import pytest

from node.planning.llm import LLMPlanner
from node.tooling import Toolbox, ToolContext, ToolRunner, tool
from tests.planning.planning_support import KEY, KEY_ENV, Model, OpenAIDialect

pytestmark = pytest.mark.asyncio(loop_scope="module")
openai = OpenAIDialect()


@tool(read_only=True)
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first term.
        b: The second term.
    """
    return a + b


async def run_two_steps(
    model: Model, http: httpx.AsyncClient, arguments: str, **settings: object
) -> None:
    scripted, url = model
    scripted.then(openai.reply(calls=[("call_9", "add", arguments)]), openai.reply("5"))
    registry = Toolbox([add])
    planner = LLMPlanner.from_settings(openai.settings(url, **settings), http)
    await planner.run("add 2 and 3", registry, ToolRunner(registry), ToolContext())


async def test_request_shapes(
    model: Model, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(KEY_ENV, KEY)
    await run_two_steps(
        model, http, '{"a": 2, "b": "3"}', api_key_env=KEY_ENV, system_prompt="Be brief."
    )
    first, second = model[0].requests

    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body == {
        "model": "scripted",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "add 2 and 3"},
        ],
        "max_tokens": 1024,
        "temperature": 0.0,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": Toolbox([add]).definitions()[0].parameters,
                },
            }
        ],
        "tool_choice": "auto",
    }
    assert second.body["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": "3"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "5"},
    ]


async def test_no_authorization_header_without_a_key(model: Model, http: httpx.AsyncClient):
    await run_two_steps(model, http, '{"a": 2, "b": 3}')
    assert all("authorization" not in r.headers for r in model[0].requests)


async def test_malformed_argument_json_is_an_error_result(model: Model, http: httpx.AsyncClient):
    await run_two_steps(model, http, '{"a": 2, "b": ')
    [tool_message] = model[0].requests[1].body["messages"][3:]
    assert tool_message["tool_call_id"] == "call_9"
    assert tool_message["content"].startswith("error (bad_arguments): arguments are not valid JSON")
