"""Ids a store cannot hold get -32602 / HTTP 400 from a real node, on SQLite and PostgreSQL alike.

A real node (uvicorn on loopback, lifespan on) per store; raw httpx so that the exact wire
answers are checked on both bindings: JSON-RPC at ``/`` and HTTP+JSON under ``/rest``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor, encode_page_token

from node.card import parse_card
from node.server.app import build_node_app

A2A = {"A2A-Version": "1.0"}
HUGE = os.urandom(1_400).hex()  # 2,800 random characters
NUL = "ctx\x00x"
CARD = {"id": "ids-node", "name": "Ids", "description": "Ids under test.", "tools": ["calculate"]}


def message(**fields: Any) -> dict[str, Any]:
    data = {"skill": "calculate", "arguments": {"expression": "2 + 2"}}
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": data}], **fields}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@pytest.fixture
async def node(serve: Any, tmp_path: Path, node_store: str) -> AsyncIterator[httpx.AsyncClient]:
    card = parse_card(CARD, env={})
    url = await serve(
        lambda public_url: build_node_app(
            card, public_url=public_url, data_dir=tmp_path / "node", store=node_store
        )
    )
    async with httpx.AsyncClient(base_url=url, headers=A2A, timeout=10) as client:
        yield client


async def rpc_error(node: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await node.post("/", json=rpc(method, params))
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" in body, f"{method} {str(params)[:80]} was accepted: {response.text[:200]}"
    error: dict[str, Any] = body["error"]
    return error


async def all_listed(node: httpx.AsyncClient) -> list[str]:
    response = await node.post("/", json=rpc("ListTasks", {"pageSize": 100}))
    result = response.json()["result"]
    return [t["id"] for t in result.get("tasks", [])]


async def test_json_rpc_refuses_ids_a_store_cannot_hold(node: httpx.AsyncClient) -> None:
    done = await node.post("/", json=rpc("SendMessage", {"message": message()}))
    first = done.json()["result"]["task"]["id"]
    cases = [
        ("SendMessage", {"message": message(contextId=HUGE)}, "message.contextId"),
        ("SendMessage", {"message": message(contextId=NUL)}, "message.contextId"),
        ("SendMessage", {"message": message(contextId="x" * 257)}, "message.contextId"),
        ("SendMessage", {"message": message(messageId="m\x00")}, "message.messageId"),
        ("SendMessage", {"message": message(messageId=HUGE)}, "message.messageId"),
        ("SendMessage", {"message": message(taskId=HUGE)}, "message.taskId"),
        ("SendStreamingMessage", {"message": message(contextId=NUL)}, "message.contextId"),
        ("GetTask", {"id": "t\x00"}, "id"),
        ("GetTask", {"id": HUGE}, "id"),
        ("CancelTask", {"id": "t\x00"}, "id"),
        ("SubscribeToTask", {"id": "t\x00"}, "id"),
        ("ListTasks", {"contextId": NUL}, "contextId"),
        ("ListTasks", {"contextId": HUGE}, "contextId"),
        ("ListTasks", {"pageToken": encode_page_token("a\x00b")}, "Invalid page token"),
        ("ListTasks", {"pageToken": encode_page_token(HUGE)}, "Invalid page token"),
        (
            "ListTasks",
            {"pageToken": encode_list_tasks_cursor(ListTasksCursor(timestamp_ns=1, task_id=NUL))},
            "Invalid page token",
        ),
    ]
    for method, params, field in cases:
        error = await rpc_error(node, method, params)
        assert error["code"] == -32602, (method, str(params)[:80], error)
        assert field in error["message"], (method, error["message"])
        assert len(error["message"]) < 200  # names the field, never echoes the value
    assert await all_listed(node) == [first]


async def test_rest_refuses_ids_a_store_cannot_hold(node: httpx.AsyncClient) -> None:
    done = await node.post("/rest/message:send", json={"message": message()})
    first = done.json()["task"]["id"]
    token = quote(encode_page_token("a\x00b"))
    cases = [
        ("POST", "/rest/message:send", {"message": message(contextId=HUGE)}),
        ("POST", "/rest/message:send", {"message": message(contextId=NUL)}),
        ("POST", "/rest/message:send", {"message": message(messageId="m\x00")}),
        ("POST", "/rest/message:stream", {"message": message(contextId=NUL)}),
        ("GET", "/rest/tasks/t%00x", None),
        ("GET", "/rest/tasks/" + "y" * 300, None),
        ("POST", "/rest/tasks/t%00x:cancel", {}),
        ("GET", "/rest/tasks?contextId=a%00b", None),
        ("GET", "/rest/tasks?contextId=" + HUGE, None),
        ("GET", f"/rest/tasks?pageToken={token}", None),
    ]
    for method, path, body in cases:
        response = await node.request(method, path, json=body)
        assert response.status_code == 400, (method, path[:60], response.text[:200])
        assert response.json()["error"]["status"] == "INVALID_ARGUMENT", response.text[:200]
    listed = await node.get("/rest/tasks")
    assert [t["id"] for t in listed.json()["tasks"]] == [first]
