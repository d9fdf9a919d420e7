"""A scripted chat model on 127.0.0.1 that speaks the real wire formats and records requests.

``ScriptedModel`` answers each POST with the next scripted item: a JSON body (200), a
:class:`Raw` response (any status and body), or :data:`HANG` (no answer until the test ends).
A :class:`Dialect` builds replies and reads recorded requests for one provider's wire format.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from node.planning.settings import PlannerSettings

KEY = "sk-test-SECRET-4242"  # the fake API key; must never appear in an error
KEY_ENV = "A2A_NODE_TEST_MODEL_KEY"


@dataclass(frozen=True)
class Raw:
    status: int
    body: str
    media_type: str = "application/json"


HANG = object()


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedModel:
    script: deque[Any] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def reset(self) -> None:
        self.script.clear()
        self.requests.clear()
        self.release = asyncio.Event()

    def then(self, *items: Any) -> ScriptedModel:
        self.script.extend(items)
        return self

    def app(self, _url: str) -> Starlette:
        return Starlette(
            routes=[
                Route("/healthz", lambda _: PlainTextResponse("ok")),
                Route("/v1/chat/completions", self._answer, methods=["POST"]),
                Route("/v1/messages", self._answer, methods=["POST"]),
            ]
        )

    async def _answer(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        self.requests.append(Recorded(request.url.path, dict(request.headers), body))
        if not self.script:
            return JSONResponse({"error": {"message": "script exhausted"}}, 500)
        item = self.script.popleft()
        if item is HANG:
            await asyncio.wait_for(self.release.wait(), 30)
            return JSONResponse({"error": {"message": "released"}}, 503)
        if isinstance(item, Raw):
            return Response(item.body, item.status, media_type=item.media_type)
        return JSONResponse(item)


Model = tuple[ScriptedModel, str]  # the scripted server and its base URL
Call = tuple[str, str, Any]  # (id, tool name, arguments: a dict, or a raw JSON string for openai)


class Dialect:
    name: str

    def settings(self, url: str, **overrides: Any) -> PlannerSettings:
        raise NotImplementedError

    def reply(
        self, text: str = "", calls: Iterable[Call] = (), usage: tuple[int, int] = (10, 5)
    ) -> dict[str, Any]:
        raise NotImplementedError

    def tool_names(self, body: Any) -> list[str]:
        raise NotImplementedError

    def tool_results(self, body: Any) -> list[tuple[str, str]]:
        """``(call id, content)`` of the tool results at the end of a request."""
        raise NotImplementedError

    def key_header(self, headers: dict[str, str]) -> str | None:
        raise NotImplementedError


class OpenAIDialect(Dialect):
    name = "openai"

    def settings(self, url: str, **overrides: Any) -> PlannerSettings:
        return PlannerSettings(
            provider="openai", base_url=f"{url}/v1", model="scripted", **overrides
        )

    def reply(
        self, text: str = "", calls: Iterable[Call] = (), usage: tuple[int, int] = (10, 5)
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        tool_calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for call_id, name, args in calls
        ]
        if tool_calls:
            message["tool_calls"] = tool_calls
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if tool_calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }

    def tool_names(self, body: Any) -> list[str]:
        return [t["function"]["name"] for t in body.get("tools", [])]

    def tool_results(self, body: Any) -> list[tuple[str, str]]:
        results: list[tuple[str, str]] = []
        for message in reversed(body["messages"]):
            if message["role"] != "tool":
                break
            results.insert(0, (message["tool_call_id"], message["content"]))
        return results

    def key_header(self, headers: dict[str, str]) -> str | None:
        auth = headers.get("authorization")
        return auth.removeprefix("Bearer ") if auth else None


class AnthropicDialect(Dialect):
    name = "anthropic"

    def settings(self, url: str, **overrides: Any) -> PlannerSettings:
        return PlannerSettings(provider="anthropic", base_url=url, model="scripted", **overrides)

    def reply(
        self, text: str = "", calls: Iterable[Call] = (), usage: tuple[int, int] = (10, 5)
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, name, args in calls
        ]
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "scripted",
            "content": content,
            "stop_reason": "tool_use" if len(content) > bool(text) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    def tool_names(self, body: Any) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    def tool_results(self, body: Any) -> list[tuple[str, str]]:
        last = body["messages"][-1]
        if last["role"] != "user" or isinstance(last["content"], str):
            return []
        return [
            (block["tool_use_id"], block["content"])
            for block in last["content"]
            if block["type"] == "tool_result"
        ]

    def key_header(self, headers: dict[str, str]) -> str | None:
        return headers.get("x-api-key")


DIALECTS = [OpenAIDialect(), AnthropicDialect()]
