"""A node with a model endpoint: free text goes through the LLM loop and the node's tools.

The node runs in-process; the model is a scripted server on 127.0.0.1 (the node reaches it with its
own HTTP client) that speaks the OpenAI chat-completions wire format.
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from node.client import NodeClient, artifacts_of, status_text, text_message


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def scripted_model(replies: list[dict[str, Any]], seen: list[Any]) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        seen.append(await request.json())
        return JSONResponse(completion(replies.pop(0)))

    async def health(_: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/healthz", health)]
    )


async def test_free_text_runs_the_model_loop_with_the_nodes_tools(serve, start_node, http):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculate", "arguments": json.dumps({"expression": "6*7"})},
    }
    replies = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "assistant", "content": "6 times 7 is 42."},
    ]
    seen: list[Any] = []
    model = await serve(lambda _: scripted_model(replies, seen))
    url = await start_node(planner={"provider": "openai", "base_url": f"{model}/v1", "model": "m"})
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        task = await client.send(text_message("What is 6 times 7?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        found = artifacts_of(task)
        assert found["answer"] == ["6 times 7 is 42."]
        assert found["tool_calls"] == [{"calls": [{"tool": "calculate", "ok": True}]}]
        first, second = seen
        assert first["messages"][-1] == {"role": "user", "content": "What is 6 times 7?"}
        assert "calculate" in [t["function"]["name"] for t in first["tools"]]
        tool_message = second["messages"][-1]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
        assert tool_message["content"] == "42"
        assert status_text(task) == "6 times 7 is 42."  # the answer, not a progress line
        # structured requests still bypass the model: a data part, a JSON call written as text,
        # and text naming its skill in metadata (crewAI's skill_id here)
        direct = await client.call("calculate", {"expression": "1+1"})
        assert artifacts_of(direct) == {"calculate": [2]}
        as_text = await client.send(
            text_message('{"skill": "calculate", "arguments": {"expression": "2+2"}}')
        )
        assert artifacts_of(as_text) == {"calculate": [4]}
        named = text_message("3+3")
        named.metadata.update({"skill_id": "calculate"})
        assert artifacts_of(await client.send(named)) == {"calculate": [6]}
    assert len(seen) == 2


async def test_an_unreachable_model_fails_the_task_with_a_clear_reason(start_node, http):
    url = await start_node(
        planner={"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    )
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        task = await client.send(text_message("hello"))
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "127.0.0.1:9" in status_text(task) or "model" in status_text(task).lower()
