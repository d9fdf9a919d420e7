"""The 0.3 methods and 0.3 REST paths go through the same guards as 1.0.

The edge (body limit, content type, UTF-8, depth, finite numbers) and NodeRequestHandler (ids,
user role, idempotent sends, -32004 for terminal tasks) see the 1.0 request the SDK's 0.3 adapter
converts to, so each hostile 0.3 request gets a clear client error, nothing internal leaks, and
the node keeps serving (checked as in test_hostile_requests, on every store).
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from tests.server.test_hostile_requests import (
    HUGE_CTX,
    LEAKS,
    LONG,
    MAX_BODY,
    NON_FINITE,
    NUL,
    Case,
    assert_healthy,
    node,  # noqa: F401 (the fixture: one in-process node per store)
    raw,
    with_literal,
)

JSON = {"Content-Type": "application/json"}  # 0.3 clients send no A2A-Version header
CALC = {"skill": "calculate", "arguments": {"expression": "6*7"}}


def msg(parts: Any = None, **fields: Any) -> dict[str, Any]:
    """A 0.3 message (``kind`` on message and parts, lowercase role)."""
    message = {"kind": "message", "messageId": os.urandom(6).hex(), "role": "user"}
    message["parts"] = [{"kind": "data", "data": CALC}] if parts is None else parts
    message.update(fields)
    return message


def rpc(name: str, method: Any, params: Any) -> Case:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return raw(name, json.dumps(body), headers=dict(JSON))


def rest_msg(**fields: Any) -> dict[str, Any]:
    """A 0.3 REST message (proto JSON: ``content`` parts, enum role)."""
    message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER"}
    message["content"] = [{"data": {"data": CALC}}]
    message.update(fields)
    return message


def rest(name: str, method: str, path: str, body: Any = None) -> Case:
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    return Case(f"REST {name}", method, "/rest/v1" + path, data, dict(JSON))


def json_rpc_cases() -> list[Case]:
    send = "message/send"
    cases = [
        rpc("params missing", send, None),
        rpc("params string", send, "hello"),
        rpc("message missing", send, {}),
        rpc("parts empty", send, {"message": msg([])}),
        rpc("part kind unknown", send, {"message": msg([{"kind": "video", "x": 1}])}),
        rpc("part text int", send, {"message": msg([{"kind": "text", "text": 5}])}),
        rpc("role agent", send, {"message": msg(role="agent")}),
        rpc("role unknown", send, {"message": msg(role="robot")}),
        rpc("messageId missing", send, {"message": {"kind": "message", "role": "user"}}),
        rpc("messageId long", send, {"message": msg(messageId=LONG)}),
        rpc("messageId NUL", send, {"message": msg(messageId=NUL)}),
        rpc("contextId long", send, {"message": msg(contextId=HUGE_CTX)}),
        rpc("contextId NUL", send, {"message": msg(contextId=NUL)}),
        rpc("taskId unknown", send, {"message": msg(taskId="no-such-task")}),
        rpc("taskId NUL", send, {"message": msg(taskId=NUL)}),
        rpc("taskId long", send, {"message": msg(taskId=LONG)}),
        rpc("metadata list", send, {"message": msg(metadata=[1])}),
        rpc("unknown skill", send, {"message": msg([{"kind": "data", "data": {"skill": "x"}}])}),
        rpc(
            "deep params",
            send,
            {"message": msg([{"kind": "data", "data": {"a": json.loads("[" * 80 + "]" * 80)}}])},
        ),
        rpc("stream NUL context", "message/stream", {"message": msg(contextId=NUL)}),
        rpc("stream role agent", "message/stream", {"message": msg(role="agent")}),
        rpc("get unknown", "tasks/get", {"id": "no-such-task"}),
        rpc("get NUL", "tasks/get", {"id": NUL}),
        rpc("get long", "tasks/get", {"id": LONG}),
        rpc("get id int", "tasks/get", {"id": 5}),
        rpc("cancel unknown", "tasks/cancel", {"id": "no-such-task"}),
        rpc("cancel NUL", "tasks/cancel", {"id": NUL}),
        rpc("resubscribe unknown", "tasks/resubscribe", {"id": "no-such-task"}),
        rpc("push get unknown", "tasks/pushNotificationConfig/get", {"id": "no-such-task"}),
        rpc("extended card", "agent/getAuthenticatedExtendedCard", {}),
        rpc("tasks/list (none in 0.3)", "tasks/list", {}),
        raw(
            "text/plain",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": send, "params": {"message": msg()}}),
            headers={"Content-Type": "text/plain"},
        ),
        raw(
            "invalid utf-8",
            b'{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"\xc3\x28"}}',
            headers=dict(JSON),
        ),
        raw("deep arrays", b"[" * 200_000 + b"]" * 200_000, headers=dict(JSON)),
        raw(
            "oversize",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": send,
                    "params": {"message": msg([{"kind": "text", "text": "x" * MAX_BODY}])},
                }
            ),
            headers=dict(JSON),
        ),
    ]
    for literal in NON_FINITE:
        body = {"jsonrpc": "2.0", "id": 1, "method": send}
        args = {**body, "params": {"message": msg([{"kind": "data", "data": {"x": "@@"}}])}}
        meta = {**body, "params": {"message": msg(metadata={"w": "@@"})}}
        cases += [
            raw(f"{literal} in a data part", with_literal(args, literal), headers=dict(JSON)),
            raw(f"{literal} in metadata", with_literal(meta, literal), headers=dict(JSON)),
        ]
    return cases


def rest_cases() -> list[Case]:
    return [
        rest("send empty body", "POST", "/message:send", b""),
        rest("send malformed", "POST", "/message:send", b"{"),
        rest("send invalid utf-8", "POST", "/message:send", b"\xff\xfe"),
        rest("send deep", "POST", "/message:send", b"[" * 200_000 + b"]" * 200_000),
        rest("send no message", "POST", "/message:send", {}),
        rest("send role agent", "POST", "/message:send", {"request": rest_msg(role="ROLE_AGENT")}),
        rest("send NUL context", "POST", "/message:send", {"request": rest_msg(contextId=NUL)}),
        rest("send long task", "POST", "/message:send", {"request": rest_msg(taskId=LONG)}),
        rest("send NaN", "POST", "/message:send", b'{"request": {"metadata": {"x": NaN}}}'),
        rest("stream NUL context", "POST", "/message:stream", {"request": rest_msg(contextId=NUL)}),
        rest("get unknown", "GET", "/tasks/no-such-task"),
        rest("get NUL id", "GET", "/tasks/a%00b"),
        rest("get long id", "GET", "/tasks/" + "y" * 5_000),
        rest("cancel unknown", "POST", "/tasks/no-such-task:cancel", {}),
        rest("subscribe unknown", "GET", "/tasks/no-such-task:subscribe"),
        Case(
            "REST send text/plain",
            "POST",
            "/rest/v1/message:send",
            json.dumps({"request": rest_msg()}).encode(),
            {"Content-Type": "text/plain"},
        ),
    ]


CASES = json_rpc_cases() + rest_cases()


def problem(response: httpx.Response) -> str | None:
    """Why ``response`` is not a clear client error (or a reasoned rejected task), or None."""
    text = response.text
    if LEAKS.search(text):
        return f"leaks internals: {text[:300]}"
    if response.status_code >= 500:
        return f"HTTP {response.status_code}: {text[:300]}"
    if response.status_code >= 400:
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return None if '"error"' in text else f"stream without an error: {text[:300]}"
    answer = response.json()
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        if error.get("code") == -32603:
            return f"internal error: {error.get('message')}"
        return None if error.get("message") else f"error without message: {answer}"
    task = answer.get("result", answer)
    state = task.get("status", {}).get("state")
    if state in ("rejected", "failed", "input-required") and task["status"].get("message"):
        return None
    return f"accepted: {text[:300]}"


async def test_hostile_0_3_requests_get_clear_client_errors(node: httpx.AsyncClient) -> None:  # noqa: F811
    assert len({case.name for case in CASES}) == len(CASES)
    problems = []
    for case in CASES:
        response = await node.request(
            case.method, case.path, content=case.body, headers=case.headers
        )
        found = problem(response)
        if found is not None:
            problems.append(f"{case.name} ({case.method} {case.path[:40]}): {found}")
    assert problems == [], "\n".join(problems)
    await assert_healthy(node)


async def send_v03(client: httpx.AsyncClient, message: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    answer: dict[str, Any] = (await client.post("/", json=body)).json()
    return answer


async def test_0_3_send_is_idempotent_per_message_id(node: httpx.AsyncClient) -> None:  # noqa: F811
    message = msg()
    first = (await send_v03(node, message))["result"]
    again = (await send_v03(node, message))["result"]
    assert first["status"]["state"] == again["status"]["state"] == "completed"
    assert again["id"] == first["id"]

    changed = await send_v03(node, {**message, "parts": [{"kind": "text", "text": "other"}]})
    assert changed["error"]["code"] == -32602, changed


async def test_0_3_message_to_a_terminal_task_is_refused(node: httpx.AsyncClient) -> None:  # noqa: F811
    done = (await send_v03(node, msg()))["result"]
    follow = msg(taskId=done["id"], contextId=done["contextId"])
    answer = await send_v03(node, follow)
    assert answer["error"]["code"] == -32004, answer
    assert "terminal" in answer["error"]["message"]

    rest = await node.post(
        "/rest/v1/message:send",
        json={"request": rest_msg(taskId=done["id"], contextId=done["contextId"])},
    )
    assert 400 <= rest.status_code < 500, rest.text
    assert "terminal" in rest.text


async def test_0_3_agent_role_and_bad_ids_are_refused(node: httpx.AsyncClient) -> None:  # noqa: F811
    for message in (msg(role="agent"), msg(contextId=NUL), msg(messageId=LONG)):
        answer = await send_v03(node, message)
        assert answer["error"]["code"] == -32602, answer


async def test_0_3_push_configs_pass_the_ssrf_guard(node: httpx.AsyncClient) -> None:  # noqa: F811
    """A 0.3 webhook to a non-public address is refused like a 1.0 one (-32602), both ways in."""
    metadata_url = "http://169.254.169.254/latest/meta-data/"
    send = {"message": msg(), "configuration": {"pushNotificationConfig": {"url": metadata_url}}}
    answer = (await node.post("/", json=rpc_body("message/send", send))).json()
    assert answer["error"]["code"] == -32602, answer

    task = (await send_v03(node, msg()))["result"]
    config = {"taskId": task["id"], "pushNotificationConfig": {"url": metadata_url}}
    answer = (
        await node.post("/", json=rpc_body("tasks/pushNotificationConfig/set", config))
    ).json()
    assert answer["error"]["code"] == -32602, answer


def rpc_body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
