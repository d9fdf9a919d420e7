"""Hundreds of malformed or hostile requests, on both bindings and both stores: each gets a clear
client error, nothing internal leaks, the node keeps serving and its store stays readable.

For every case the answer must be an HTTP 4xx, a JSON-RPC error with a non-internal code, or a task
REJECTED (or FAILED by a tool, or INPUT_REQUIRED for missing arguments) with a readable reason; its
text must not hold a traceback, SQL, a driver's name or a host path. After all cases the node must
still complete a task, every ``ListTasks`` page must load on both bindings, and no task may be left
submitted or working.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.card import parse_card
from node.server.app import build_node_app
from tests.server.conftest import A2A_HEADERS, card_data
from tests.server.test_edge_guard import STORES, fresh_schema

JSON = {**A2A_HEADERS, "Content-Type": "application/json"}
MAX_BODY = 64_000
LEAKS = re.compile(
    r"Traceback|File \"|site-packages|/tmp/|/work/|/home/|/root/|SELECT |INSERT |UPDATE |"
    r"asyncpg|sqlite3|psycopg|ProgramLimit|RecursionError|maximum recursion|"
    r"UnicodeDecodeError|KeyError|AttributeError|TypeError:|ValueError:|unknown exception",
)


@dataclass(frozen=True)
class Case:
    """One request: ``method`` ``path`` with ``body`` (bytes, or JSON data) and ``headers``."""

    name: str
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))


def raw(
    name: str, body: bytes | str, path: str = "/", headers: dict[str, str] | None = None
) -> Case:
    data = body.encode() if isinstance(body, str) else body
    return Case(name, "POST", path, data, dict(JSON) if headers is None else headers)


def rpc(name: str, method: Any, params: Any, id_: Any = 1, **extra: Any) -> Case:
    body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params, **extra}
    return raw(name, json.dumps(body))


def rest(name: str, method: str, path: str, body: Any = None) -> Case:
    data = (
        None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    )
    return Case(name, method, "/rest" + path, data)


def msg(parts: Any = None, **fields: Any) -> dict[str, Any]:
    message = {"messageId": os.urandom(6).hex(), "role": "ROLE_USER"}
    message["parts"] = [{"data": {"skill": "calculate", "arguments": {"expression": "1"}}}]
    if parts is not None:
        message["parts"] = parts
    message.update(fields)
    return message


def data_part(value: Any) -> list[dict[str, Any]]:
    return [{"data": value}]


def with_literal(case_body: dict[str, Any], literal: str) -> str:
    return json.dumps(case_body).replace('"@@"', literal)


LONG = "x" * 5_000
HUGE_CTX = os.urandom(2_000).hex()  # 4,000 random characters
NUL = "a\x00b"
TOKENS = [
    "garbage",
    "%%%",
    base64.urlsafe_b64encode(b"\x00").decode(),
    base64.urlsafe_b64encode(b"\x00\x00\x00\x00").decode(),
    base64.urlsafe_b64encode(b"9" * 400).decode(),
    base64.urlsafe_b64encode(b"1:" + b"\x00" * 10).decode(),
    base64.urlsafe_b64encode(json.dumps({"t": 1e308, "id": NUL}).encode()).decode(),
    "A" * 5_000,
]
NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-2e308", "9" * 400]


def json_rpc_cases() -> list[Case]:
    cases = [
        raw("empty body", b""),
        raw("whitespace", b"   \n"),
        raw("open brace", b"{"),
        raw("truncated", b'{"jsonrpc": "2.0", "id": 1, "method": "GetTa'),
        raw("trailing comma", b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{},}'),
        raw("single quotes", b"{'jsonrpc':'2.0'}"),
        raw("bare word", b"nul"),
        raw("NUL byte", b"\x00"),
        raw("number", b"42"),
        raw("string", b'"SendMessage"'),
        raw("null", b"null"),
        raw("empty array", b"[]"),
        raw("batch", json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}] * 2)),
        raw("bom", b"\xef\xbb\xbf" + json.dumps({"jsonrpc": "2.0", "id": 1}).encode()),
        raw("invalid utf-8 start", b"\xff\xfe{}"),
        raw(
            "invalid utf-8 in string",
            b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xc3\x28"}}',
        ),
        raw("overlong utf-8", b'{"jsonrpc":"2.0","id":"\xc0\xaf","method":"GetTask"}'),
        raw("utf-16 body", json.dumps({"jsonrpc": "2.0", "id": 1}).encode("utf-16")),
        raw(
            "lone surrogate escape",
            r'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\ud800"}}',
        ),
        raw("deep arrays 65", b"[" * 65 + b"]" * 65),
        raw("deep arrays 200k", b"[" * 200_000 + b"]" * 200_000),
        raw("deep objects", b'{"a":' * 3_000 + b"1" + b"}" * 3_000),
        raw("unbalanced deep", b"[" * 100_000),
        rpc(
            "deep params",
            "SendMessage",
            {"message": msg(data_part(json.loads("[" * 80 + "]" * 80)))},
        ),
        rpc(
            "deep metadata",
            "SendMessage",
            {"message": msg(metadata=json.loads('{"a":' * 70 + "1" + "}" * 70))},
        ),
        rpc("jsonrpc 1.0", "GetTask", {"id": "x"}, jsonrpc="1.0"),
        raw("no jsonrpc", json.dumps({"id": 1, "method": "GetTask", "params": {"id": "x"}})),
        raw("no method", json.dumps({"jsonrpc": "2.0", "id": 1, "params": {}})),
        rpc("method int", 7, {}),
        rpc("method null", None, {}),
        rpc("method list", ["SendMessage"], {}),
        rpc("method empty", "", {}),
        rpc("method long", "M" * 10_000, {}),
        rpc("method unknown", "NoSuchMethod", {}),
        rpc("method case", "sendmessage", {"message": msg()}),
        rpc("method with NUL", "Send\x00Message", {"message": msg()}),
        rpc("id object", "GetTask", {"id": "x"}, id_={"a": 1}),
        rpc("id list", "GetTask", {"id": "x"}, id_=[1]),
        rpc("id bool", "GetTask", {"id": "x"}, id_=True),
        rpc("id float", "GetTask", {"id": "x"}, id_=1.5),
        rpc("params string", "SendMessage", "hello"),
        rpc("params list", "SendMessage", [1, 2]),
        rpc("params null", "SendMessage", None),
        rpc("message missing", "SendMessage", {}),
        rpc("message string", "SendMessage", {"message": "hi"}),
        rpc("message list", "SendMessage", {"message": [msg()]}),
        rpc("parts empty", "SendMessage", {"message": msg([])}),
        rpc("parts object", "SendMessage", {"message": msg({"text": "x"})}),
        rpc("part empty", "SendMessage", {"message": msg([{}])}),
        rpc("part text empty", "SendMessage", {"message": msg([{"text": ""}])}),
        rpc("part text int", "SendMessage", {"message": msg([{"text": 5}])}),
        rpc("part raw not base64", "SendMessage", {"message": msg([{"raw": "!!!"}])}),
        rpc("role unknown", "SendMessage", {"message": msg(role="user")}),
        rpc("role agent", "SendMessage", {"message": msg(role="ROLE_AGENT")}),
        rpc("messageId int", "SendMessage", {"message": msg(messageId=5)}),
        rpc(
            "messageId missing",
            "SendMessage",
            {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
        ),
        rpc("messageId long", "SendMessage", {"message": msg(messageId=LONG)}),
        rpc("messageId NUL", "SendMessage", {"message": msg(messageId=NUL)}),
        rpc("contextId long", "SendMessage", {"message": msg(contextId=HUGE_CTX)}),
        rpc("contextId NUL", "SendMessage", {"message": msg(contextId=NUL)}),
        rpc("contextId newline", "SendMessage", {"message": msg(contextId="a\nb")}),
        rpc("taskId unknown", "SendMessage", {"message": msg(taskId="no-such-task")}),
        rpc("taskId long", "SendMessage", {"message": msg(taskId=LONG)}),
        rpc("taskId NUL", "SendMessage", {"message": msg(taskId=NUL)}),
        rpc("taskId object", "SendMessage", {"message": msg(taskId={"a": 1})}),
        rpc("metadata list", "SendMessage", {"message": msg(metadata=[1])}),
        rpc(
            "historyLength string",
            "SendMessage",
            {"message": msg(), "configuration": {"historyLength": "x"}},
        ),
        rpc(
            "historyLength huge",
            "SendMessage",
            {"message": msg(), "configuration": {"historyLength": 10**30}},
        ),
        rpc(
            "push config bad url",
            "SendMessage",
            {
                "message": msg(),
                "configuration": {"taskPushNotificationConfig": {"url": "http://169.254.169.254/"}},
            },
        ),
        rpc(
            "unknown skill", "SendMessage", {"message": msg(data_part({"skill": "no_such_skill"}))}
        ),
        rpc(
            "skill typo",
            "SendMessage",
            {"message": msg(data_part({"skill": "calculat", "arguments": {}}))},
        ),
        rpc("internal tool", "SendMessage", {"message": msg(data_part({"tool": "secret_helper"}))}),
        rpc(
            "args wrong type",
            "SendMessage",
            {"message": msg(data_part({"skill": "calculate", "arguments": {"expression": [1]}}))},
        ),
        rpc(
            "args extra",
            "SendMessage",
            {
                "message": msg(
                    data_part({"skill": "text_stats", "arguments": {"text": "x", "bogus": 1}})
                )
            },
        ),
        rpc(
            "args missing",
            "SendMessage",
            {"message": msg(data_part({"skill": "text_stats", "arguments": {}}))},
        ),
        rpc(
            "args string not json",
            "SendMessage",
            {"message": msg(data_part({"skill": "calculate", "arguments": "{nope"}))},
        ),
        rpc(
            "args NaN string",
            "SendMessage",
            {"message": msg(data_part({"skill": "calculate", "arguments": '{"expression": NaN}'}))},
        ),
        rpc("calls not a list", "SendMessage", {"message": msg(data_part({"calls": "calculate"}))}),
        rpc(
            "too many calls",
            "SendMessage",
            {
                "message": msg(
                    data_part(
                        {"calls": [{"skill": "calculate", "arguments": {"expression": "1"}}] * 100}
                    )
                )
            },
        ),
        rpc("skill int", "SendMessage", {"message": msg(data_part({"skill": 5}))}),
        rpc(
            "free text without planner",
            "SendMessage",
            {"message": msg([{"text": "please do something"}])},
        ),
        rpc(
            "hop loop",
            "SendMessage",
            {"message": msg(metadata={"urn:a2a-node:ext:hop:v1": {"chain": ["test-node"]}})},
        ),
        rpc(
            "hop malformed",
            "SendMessage",
            {"message": msg(metadata={"urn:a2a-node:ext:hop:v1": {"chain": "x"}})},
        ),
        rpc(
            "hop deadline past",
            "SendMessage",
            {"message": msg(metadata={"urn:a2a-node:ext:hop:v1": {"chain": [], "deadline": 1}})},
        ),
        rpc("GetTask unknown", "GetTask", {"id": "no-such-task"}),
        rpc("GetTask empty id", "GetTask", {"id": ""}),
        rpc("GetTask long id", "GetTask", {"id": LONG}),
        rpc("GetTask NUL id", "GetTask", {"id": NUL}),
        rpc("GetTask id int", "GetTask", {"id": 5}),
        rpc("GetTask historyLength negative", "GetTask", {"id": "x", "historyLength": -1}),
        rpc("CancelTask unknown", "CancelTask", {"id": "no-such-task"}),
        rpc("CancelTask NUL", "CancelTask", {"id": NUL}),
        rpc("CancelTask long", "CancelTask", {"id": LONG}),
        rpc("SubscribeToTask unknown", "SubscribeToTask", {"id": "no-such-task"}),
        rpc("ListTasks pageSize 0", "ListTasks", {"pageSize": 0}),
        rpc("ListTasks pageSize negative", "ListTasks", {"pageSize": -5}),
        rpc("ListTasks pageSize huge", "ListTasks", {"pageSize": 10**6}),
        rpc("ListTasks pageSize string", "ListTasks", {"pageSize": "ten"}),
        rpc("ListTasks contextId NUL", "ListTasks", {"contextId": NUL}),
        rpc("ListTasks contextId long", "ListTasks", {"contextId": HUGE_CTX}),
        rpc(
            "push config get unknown",
            "GetTaskPushNotificationConfig",
            {"taskId": "no-such-task", "id": "x"},
        ),
        rpc(
            "push config create",
            "CreateTaskPushNotificationConfig",
            {"taskId": "no-such-task", "url": "http://127.0.0.1:1/"},
        ),
        rpc("extended card", "GetExtendedAgentCard", {}),
        raw(
            "no version header",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
            headers={"Content-Type": "application/json"},
        ),
        raw(
            "bad version header",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
            headers={**JSON, "A2A-Version": "9.9"},
        ),
        raw(
            "text/plain",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask"}),
            headers={**A2A_HEADERS, "Content-Type": "text/plain"},
        ),
        raw(
            "no content type",
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask"}),
            headers=dict(A2A_HEADERS),
        ),
        raw(
            "form",
            b"a=1&b=2",
            headers={**A2A_HEADERS, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        raw("xml", b"<a/>", headers={**A2A_HEADERS, "Content-Type": "application/xml"}),
        raw(
            "oversize",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": msg([{"text": "x" * MAX_BODY}])},
                }
            ),
        ),
        raw(
            "many parts",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": msg([{"text": "x"}] * 3_000)},
                }
            ),
        ),
        Case("GET on rpc", "GET", "/"),
        Case("PUT on rpc", "PUT", "/", b"{}"),
        Case("DELETE on rpc", "DELETE", "/"),
    ]
    for literal in NON_FINITE:
        send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        args = {
            **send,
            "params": {
                "message": msg(data_part({"skill": "calculate", "arguments": {"expression": "@@"}}))
            },
        }
        meta = {**send, "params": {"message": msg(metadata={"w": "@@"})}}
        request_meta = {**send, "params": {"message": msg(), "metadata": {"w": ["@@"]}}}
        history = {**send, "params": {"message": msg(), "configuration": {"historyLength": "@@"}}}
        get = {"jsonrpc": "2.0", "id": "@@", "method": "GetTask", "params": {"id": "x"}}
        cases += [
            raw(f"{literal} in arguments", with_literal(args, literal)),
            raw(f"{literal} in message metadata", with_literal(meta, literal)),
            raw(f"{literal} in request metadata", with_literal(request_meta, literal)),
            raw(f"{literal} as historyLength", with_literal(history, literal)),
            raw(f"{literal} as id", with_literal(get, literal)),
        ]
    cases += [
        rpc(f"ListTasks pageToken {i}", "ListTasks", {"pageToken": t}) for i, t in enumerate(TOKENS)
    ]
    return cases


def rest_cases() -> list[Case]:
    cases = [
        rest("send empty body", "POST", "/message:send", b""),
        rest("send malformed", "POST", "/message:send", b"{"),
        rest("send array", "POST", "/message:send", b"[]"),
        rest("send string", "POST", "/message:send", b'"x"'),
        rest("send invalid utf-8", "POST", "/message:send", b"\xff\xfe"),
        rest("send deep", "POST", "/message:send", b"[" * 200_000 + b"]" * 200_000),
        rest("send deep objects", "POST", "/message:send", b'{"a":' * 5_000 + b"1" + b"}" * 5_000),
        rest("send no message", "POST", "/message:send", {}),
        rest("send message string", "POST", "/message:send", {"message": "x"}),
        rest("send no parts", "POST", "/message:send", {"message": msg([])}),
        rest("send role unknown", "POST", "/message:send", {"message": msg(role="user")}),
        rest("send long context", "POST", "/message:send", {"message": msg(contextId=HUGE_CTX)}),
        rest("send NUL context", "POST", "/message:send", {"message": msg(contextId=NUL)}),
        rest("send NUL task", "POST", "/message:send", {"message": msg(taskId=NUL)}),
        rest("send long messageId", "POST", "/message:send", {"message": msg(messageId=LONG)}),
        rest("send unknown task", "POST", "/message:send", {"message": msg(taskId="nope")}),
        rest(
            "send unknown skill",
            "POST",
            "/message:send",
            {"message": msg(data_part({"skill": "nope"}))},
        ),
        rest(
            "send bad args",
            "POST",
            "/message:send",
            {
                "message": msg(
                    data_part({"skill": "calculate", "arguments": {"expression": {"a": 1}}})
                )
            },
        ),
        rest("stream malformed", "POST", "/message:stream", b"{"),
        rest("stream NUL context", "POST", "/message:stream", {"message": msg(contextId=NUL)}),
        rest("stream invalid utf-8", "POST", "/message:stream", b"\xc3\x28"),
        rest("get unknown", "GET", "/tasks/no-such-task"),
        rest("get long id", "GET", "/tasks/" + "y" * 5_000),
        rest("get NUL id", "GET", "/tasks/a%00b"),
        rest("get encoded slash", "GET", "/tasks/a%2Fb"),
        rest("get traversal", "GET", "/tasks/..%2F..%2Fetc%2Fpasswd"),
        rest("get historyLength string", "GET", "/tasks/x?historyLength=abc"),
        rest("get historyLength negative", "GET", "/tasks/x?historyLength=-4"),
        rest("cancel unknown", "POST", "/tasks/no-such-task:cancel", {}),
        rest("cancel NUL", "POST", "/tasks/a%00b:cancel", {}),
        rest("cancel long", "POST", "/tasks/" + "z" * 5_000 + ":cancel", {}),
        rest("subscribe unknown", "GET", "/tasks/no-such-task:subscribe"),
        rest("list pageSize string", "GET", "/tasks?pageSize=abc"),
        rest("list pageSize negative", "GET", "/tasks?pageSize=-3"),
        rest("list pageSize huge", "GET", "/tasks?pageSize=99999999999999999999999"),
        rest("list context NUL", "GET", "/tasks?contextId=a%00b"),
        rest("list context long", "GET", "/tasks?contextId=" + HUGE_CTX),
        rest("list timestamp bogus", "GET", "/tasks?statusTimestampAfter=yesterday"),
        rest("push configs unknown", "GET", "/tasks/nope/pushNotificationConfigs"),
        rest(
            "push config create on REST",
            "POST",
            "/tasks/nope/pushNotificationConfigs",
            {"url": "http://127.0.0.1:1/"},
        ),
        rest("unknown path", "GET", "/nope"),
        rest("unknown nested", "GET", "/tasks/a/b/c"),
        rest("trailing slash", "GET", "/tasks/"),
        rest("dot segments", "GET", "/../../etc/passwd"),
        rest("GET on send", "GET", "/message:send"),
        rest("PUT on send", "PUT", "/message:send", {}),
        rest("DELETE on tasks", "DELETE", "/tasks"),
        Case(
            "send text/plain",
            "POST",
            "/rest/message:send",
            json.dumps({"message": msg()}).encode(),
            {**A2A_HEADERS, "Content-Type": "text/plain"},
        ),
        Case(
            "send no content type",
            "POST",
            "/rest/message:send",
            json.dumps({"message": msg()}).encode(),
            dict(A2A_HEADERS),
        ),
        Case(
            "send no version",
            "POST",
            "/rest/message:send",
            json.dumps({"message": msg()}).encode(),
            {"Content-Type": "application/json"},
        ),
        Case("get no version", "GET", "/rest/tasks/x", None, {}),
        rest(
            "send oversize", "POST", "/message:send", {"message": msg([{"text": "x" * MAX_BODY}])}
        ),
    ]
    for literal in NON_FINITE:
        body = {
            "message": msg(data_part({"skill": "calculate", "arguments": {"expression": "@@"}}))
        }
        cases.append(
            rest(f"send {literal}", "POST", "/message:send", with_literal(body, literal).encode())
        )
        meta = {"message": msg(metadata={"deep": {"w": "@@"}})}
        cases.append(
            rest(
                f"send {literal} metadata",
                "POST",
                "/message:send",
                with_literal(meta, literal).encode(),
            )
        )
    cases += [
        rest(
            f"list pageToken {i}", "GET", "/tasks?" + httpx.QueryParams({"pageToken": t}).__str__()
        )
        for i, t in enumerate(TOKENS)
    ]
    cases += [
        Case(f"card {m}", m, "/.well-known/agent-card.json", b"{}")
        for m in ("POST", "PUT", "DELETE")
    ]
    return cases


CASES = json_rpc_cases() + rest_cases()


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 150
    assert len({case.name for case in CASES}) == len(CASES)


def problem(case: Case, response: httpx.Response) -> str | None:
    """Why ``response`` is not an acceptable answer to a hostile ``case``, or None."""
    text = response.text
    if LEAKS.search(text):
        return f"leaks internals: {text[:300]}"
    if response.status_code >= 500:
        return f"HTTP {response.status_code}: {text[:300]}"
    if response.status_code >= 400:
        return None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return None if "error" in text or "REJECTED" in text or "FAILED" in text else text[:300]
    try:
        answer = response.json()
    except ValueError:
        return f"HTTP {response.status_code} with a body that is not JSON: {text[:200]}"
    error = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        if code == -32603:
            return f"internal error: {message}"
        return None if isinstance(message, str) and message else f"error without message: {answer}"
    result = answer.get("result", answer) if isinstance(answer, dict) else answer
    task = result.get("task", result) if isinstance(result, dict) else None
    state = task.get("status", {}).get("state") if isinstance(task, dict) else None
    if state in ("TASK_STATE_REJECTED", "TASK_STATE_FAILED", "TASK_STATE_INPUT_REQUIRED"):
        reason = json.dumps(task["status"].get("message", {}).get("parts", []))
        return None if len(reason) > 20 else f"{state} without a reason: {task['status']}"
    return f"accepted: HTTP {response.status_code} {text[:300]}"


@pytest.fixture(params=STORES)
async def node(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with fresh_schema(request.param) as store:
        card = parse_card(card_data(limits={"max_body_bytes": MAX_BODY}), env={})
        app = build_node_app(card, public_url="http://node.test", data_dir=tmp_path, store=store)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://node.test", timeout=30
            ) as client:
                yield client


async def test_hostile_requests_get_clear_client_errors(node: httpx.AsyncClient) -> None:
    problems = []
    for case in CASES:
        response = await node.request(
            case.method, case.path, content=case.body, headers=case.headers
        )
        found = problem(case, response)
        if found is not None:
            problems.append(f"{case.name} ({case.method} {case.path[:40]}): {found}")
    assert problems == [], "\n".join(problems)
    await assert_healthy(node)


async def assert_healthy(node: httpx.AsyncClient) -> None:
    """The node completes a task, and every task of its store loads on both bindings."""
    good = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg()}}
    answer = (await node.post("/", json=good, headers=A2A_HEADERS)).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
    token, seen = "", 0
    while True:
        params = {"pageSize": 7, **({"pageToken": token} if token else {})}
        page = (
            await node.post(
                "/", json={**good, "method": "ListTasks", "params": params}, headers=A2A_HEADERS
            )
        ).json()
        assert "result" in page, page
        for task in page["result"].get("tasks", []):
            assert task["status"]["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), (
                task
            )
            seen += 1
        token = page["result"].get("nextPageToken", "")
        if not token:
            break
    rest = await node.get("/rest/tasks", params={"pageSize": 100}, headers=A2A_HEADERS)
    assert rest.status_code == 200, rest.text
    assert seen >= 1
