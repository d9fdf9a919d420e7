"""Trace context crosses every hop, with tracing off (no tracer provider, the default).

A node B (JSON-RPC, HTTP+JSON and gRPC, A2A 1.0 and 0.3, bearer token) serves ``calculate``. A
``PeerClient`` calls it over one binding at a time, from inside an incoming trace context; B's
log line for the task carries that trace id, so the ``traceparent`` crossed the wire and B
continued it. Push deliveries and the webhook's request carry it too. Everything runs in this
process: no provider is set here, so these are the off-mode paths (spans: test_tracing_export.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import Message, Part, Role
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value
from opentelemetry import context as otel_context
from opentelemetry import propagate

from node.card import parse_card
from node.observability import logs, tracing
from node.peers.cards import card_from_json
from node.peers.peer_client import PeerClient
from node.server.app import build_node_app
from tests.peers.peers_support import calculating_node, one_interface
from tests.server.push_receiver import Receiver, eventually
from tests.servers import InProcessApps, free_socket, running

TOKEN = "b-token-0123456789"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
Serve = Any


@pytest.fixture
def executor_log() -> Iterator[io.StringIO]:
    """The JSON log lines of ``node.executor`` (one per task) while the test runs."""
    out = io.StringIO()
    handler = logs.handler("json", out)
    logger = logging.getLogger("node.executor")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield out
    logger.removeHandler(handler)
    logger.setLevel(level)


@contextlib.contextmanager
def incoming_trace() -> Iterator[None]:
    """The context a request with ``TRACEPARENT`` brings (entered after the servers started,
    so their tasks do not inherit it: only the wire can carry it there)."""
    token = otel_context.attach(propagate.extract({"traceparent": TRACEPARENT}))
    try:
        yield
    finally:
        otel_context.detach(token)


def task_lines(out: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [line for line in lines if line["message"].startswith("task ")]


def calculate(expression: str) -> Message:
    data = {"skill": "calculate", "arguments": {"expression": expression}}
    return Message(
        message_id=f"m-{time.monotonic_ns()}",
        role=Role.ROLE_USER,
        parts=[Part(data=ParseDict(data, Value()))],
    )


async def test_a_peer_call_continues_the_trace_on_every_binding(
    serve: Serve, tmp_path: Path, executor_log: io.StringIO
) -> None:
    b = await calculating_node(serve, tmp_path / "b", TOKEN)
    async with httpx.AsyncClient(timeout=10.0) as http:
        document = (await http.get(f"{b}/.well-known/agent-card.json")).json()
        bindings = [
            ("JSONRPC", "1.0"),
            ("HTTP+JSON", "1.0"),
            ("GRPC", "1.0"),
            ("JSONRPC", "0.3"),
            ("HTTP+JSON", "0.3"),
            ("GRPC", "0.3"),
        ]
        for binding, version in bindings:
            card = card_from_json(one_interface(document, binding, version))
            peer = PeerClient("data", card, http=http, token=lambda: TOKEN)
            try:
                with incoming_trace():
                    result = await peer.call(calculate("6 * 7"), deadline=time.time() + 10)
            finally:
                await peer.aclose()
            assert result == 42, (binding, version)
            lines = task_lines(executor_log)
            assert len(lines) == 1, (binding, version, lines)
            assert lines[0]["trace_id"] == TRACE_ID, (binding, version, lines[0])
            assert lines[0]["principal"] == "hub"
            assert lines[0]["task_id"] and lines[0]["context_id"]
            executor_log.seek(0)
            executor_log.truncate()


async def test_a_request_without_traceparent_logs_no_trace_id(
    serve: Serve, tmp_path: Path, executor_log: io.StringIO
) -> None:
    b = await calculating_node(serve, tmp_path / "b", TOKEN)
    async with httpx.AsyncClient(timeout=10.0) as http:
        card = card_from_json((await http.get(f"{b}/.well-known/agent-card.json")).json())
        peer = PeerClient("data", card, http=http, token=lambda: TOKEN)
        assert await peer.call(calculate("1 + 1"), deadline=time.time() + 10) == 2
    (line,) = task_lines(executor_log)
    assert "trace_id" not in line
    assert tracing.current_trace_id() is None


@incoming_trace()
def test_headers_carry_the_incoming_trace() -> None:
    headers = tracing.inject({"Authorization": "Bearer x"})
    assert headers["traceparent"].split("-")[1] == TRACE_ID
    assert tracing.current_trace_id() == TRACE_ID
    assert not tracing.enabled()
    with tracing.span("no-op"):  # off: the incoming context stays current
        assert tracing.current_trace_id() == TRACE_ID


async def test_push_deliveries_carry_the_trace_of_the_request(
    apps: InProcessApps, tmp_path: Path
) -> None:
    hooks = Receiver()
    card = parse_card(
        {
            "id": "pusher",
            "name": "Pusher",
            "description": "Pushes.",
            "tools": ["calculate"],
            "network": {"allow_cidrs": ["127.0.0.0/8"]},
            "push": {"backoff_s": 0.05, "max_backoff_s": 0.2, "timeout_s": 3.0},
        },
        env={},
    )
    url = await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "n", store="memory")
    )
    async with running(hooks.app(), free_socket()) as hook_url, apps.client() as http:
        message = calculate("2 + 3")
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": MessageToDict(message),
                "configuration": {"taskPushNotificationConfig": {"url": f"{hook_url}/hook/a"}},
            },
        }
        headers = {"A2A-Version": "1.0", "traceparent": TRACEPARENT}
        reply = (await http.post(url + "/", json=body, headers=headers)).json()
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await eventually(
            lambda: any(r.state == "TASK_STATE_COMPLETED" for r in hooks.requests),
            what="the completed event",
        )
        hooks.release()
    assert hooks.requests
    for request in hooks.requests:
        assert request.headers["traceparent"].split("-")[1] == TRACE_ID


async def test_an_mcp_call_carries_the_trace_in_its_meta(
    serve: Serve, tmp_path: Path, executor_log: io.StringIO
) -> None:
    """Node A calls node B's skill through B's /mcp endpoint (the ``mcp`` SDK puts the
    context in ``params._meta``); B's task logs the trace id A's request brought."""
    b_card = parse_card(
        {
            "id": "b",
            "name": "B",
            "description": "Arithmetic over MCP.",
            "tools": ["calculate"],
            "mcp": {"enabled": True},
        },
        env={},
    )
    b = await serve(
        lambda u: build_node_app(b_card, public_url=u, data_dir=tmp_path / "b", store="memory")
    )
    a_card = parse_card(
        {
            "id": "a",
            "name": "A",
            "description": "Uses B as an MCP server.",
            "network": {"allow_cidrs": ["127.0.0.0/8"]},
            "mcp_servers": [
                {
                    "name": "b",
                    "url": f"{b}/mcp",
                    "tools": [{"name": "calculate", "scope": "public"}],
                }
            ],
        },
        env={},
    )
    a = await serve(
        lambda u: build_node_app(a_card, public_url=u, data_dir=tmp_path / "a", store="memory")
    )
    async with httpx.AsyncClient(timeout=10.0) as http:

        async def published() -> bool:
            served = (await http.get(f"{a}/.well-known/agent-card.json")).json()
            return "mcp_b_calculate" in {s["id"] for s in served["skills"]}

        await eventually_async(published)
        data = {"skill": "mcp_b_calculate", "arguments": {"expression": "6 * 7"}}
        message = {"messageId": "m-mcp", "role": "ROLE_USER", "parts": [{"data": data}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        headers = {"A2A-Version": "1.0", "traceparent": TRACEPARENT}
        reply = (await http.post(a + "/", json=body, headers=headers)).json()
    task = reply["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    at_b = [line for line in task_lines(executor_log) if line["task_id"] != task["id"]]
    assert len(at_b) == 1, task_lines(executor_log)
    assert at_b[0]["trace_id"] == TRACE_ID


async def eventually_async(check: Any, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "not true in time"
        await asyncio.sleep(0.05)
