"""``/mcp``: a node's public skills driven by the official ``mcp`` client over streamable HTTP."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from node.card import parse_card
from node.peers.cards import skill_schemas
from node.server.app import build_node_app
from node.tooling import ToolContext, tool
from tests.mcp.conftest import eventually

READER = "reader-token-0001"
ADMIN = "admin-token-0001"


@tool(read_only=True)
async def nap(seconds: float, ctx: ToolContext) -> str:
    """Wait, then answer.

    Args:
        seconds: How long to wait.
    """
    await anyio.sleep(seconds)
    return f"napped {seconds}s"


@tool(read_only=True, requires=("admin",))
def admin_only() -> str:
    """Needs the admin capability."""
    return "admin ok"


def node_card(node_id: str, **extra: Any) -> Any:
    data: dict[str, Any] = {
        "id": node_id,
        "name": f"Node {node_id}",
        "description": "A node under test.",
        "tools": ["calculate"],
        **extra,
    }
    return parse_card(data, env={})


AUTH = {
    "bearer_tokens": [
        {"secret": READER, "principal": "reader"},
        {"secret": ADMIN, "principal": "admin", "capabilities": ["admin"]},
    ]
}


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None = READER) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=30
        ) as client,
    ):
        yield client


@pytest.fixture
async def node(serve, tmp_path) -> str:
    card = node_card("mcp-node", auth=AUTH, mcp={"enabled": True})
    return await serve(
        lambda url: build_node_app(
            card, public_url=url, data_dir=tmp_path, store="memory", tools=[nap, admin_only]
        )
    )


async def agent_card(url: str) -> AgentCard:
    async with httpx.AsyncClient() as http:
        body = (await http.get(f"{url}/.well-known/agent-card.json")).json()
    return ParseDict(body, AgentCard(), ignore_unknown_fields=True)


async def test_tools_are_the_public_skills_with_the_cards_schemas(node):
    card = await agent_card(node)
    async with mcp_client(node) as client:
        listed = (await client.list_tools()).tools
    schemas = skill_schemas(card)
    assert (
        {t.name for t in listed}
        == {s.id for s in card.skills}
        == {
            "calculate",
            "nap",
            "admin_only",
        }
    )
    for t in listed:
        assert t.input_schema == schemas[t.name]


async def test_a_local_skill_is_called_as_a_task(node):
    async with mcp_client(node) as client:
        result = await client.call_tool("calculate", {"expression": "6*7"})
    assert not result.is_error
    assert [b.text for b in result.content] == ["42"]


async def test_a_skill_needing_a_capability_the_token_lacks_is_an_error(node):
    async with mcp_client(node, READER) as client:
        denied = await client.call_tool("admin_only", {})
    assert denied.is_error and "missing capability: admin" in denied.content[0].text
    async with mcp_client(node, ADMIN) as client:
        allowed = await client.call_tool("admin_only", {})
    assert not allowed.is_error and allowed.content[0].text == "admin ok"


async def test_bad_arguments_and_unknown_tools_are_error_results(node):
    async with mcp_client(node) as client:
        bad = await client.call_tool("nap", {"seconds": "soon"})
        unknown = await client.call_tool("nope", {})
    assert bad.is_error and "seconds" in bad.content[0].text
    assert unknown.is_error


async def test_non_finite_numbers_are_refused_before_any_task(node):
    async with httpx.AsyncClient() as http:
        headers = {
            "Authorization": f"Bearer {READER}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        opened = await http.post(f"{node}/mcp", json=init, headers=headers)
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        call = '{"name": "nap", "arguments": {"seconds": NaN}}'
        body = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ' + call + "}"
        answer = await http.post(
            f"{node}/mcp", content=body, headers={**headers, "Content-Type": "application/json"}
        )
    assert "arguments.seconds must be a finite number" in answer.text


async def test_mcp_requires_the_nodes_credentials(node):
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        anonymous = await http.post(f"{node}/mcp", json=body)
        wrong = await http.post(
            f"{node}/mcp", json=body, headers={"Authorization": "Bearer not-a-token-at-all"}
        )
    assert anonymous.status_code == wrong.status_code == 401


async def test_progress_is_reported_from_the_task(node):
    seen: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with mcp_client(node) as client:
        result = await client.call_tool("nap", {"seconds": 0.1}, progress_callback=progress)
    assert not result.is_error
    assert "running nap" in seen


async def test_a_cancelled_call_cancels_the_task(node):
    async with mcp_client(node) as client:
        with anyio.move_on_after(1.0):
            await client.call_tool("nap", {"seconds": 30})

    async def states() -> list[str]:
        async with httpx.AsyncClient() as http:
            response = await http.post(
                node,
                json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
                headers={"Authorization": f"Bearer {READER}", "A2A-Version": "1.0"},
            )
        return [t["status"]["state"] for t in response.json()["result"].get("tasks", [])]

    assert await eventually(
        lambda: _only(states(), "TASK_STATE_CANCELED"), what="the task canceled"
    )


async def _only(states, wanted: str) -> bool:
    found = await states
    return found == [wanted]


async def test_a_peer_skill_two_hops_away(serve, tmp_path):
    far = await serve(
        lambda url: build_node_app(
            node_card("far"), public_url=url, data_dir=tmp_path / "far", store="memory"
        )
    )
    near_card = node_card(
        "near", tools=[], peers={"static": [{"url": far, "expose": True}], "refresh_s": 1}
    )
    near = await serve(
        lambda url: build_node_app(
            near_card, public_url=url, data_dir=tmp_path / "near", store="memory"
        )
    )
    entry_card = node_card(
        "entry",
        tools=[],
        mcp={"enabled": True},
        peers={"static": [{"url": near, "expose": True}], "refresh_s": 1},
    )
    entry = await serve(
        lambda url: build_node_app(
            entry_card, public_url=url, data_dir=tmp_path / "e", store="memory"
        )
    )

    async def two_hop_tool() -> str | None:
        async with mcp_client(entry, None) as client:
            names = [t.name for t in (await client.list_tools()).tools]
        return next((n for n in names if n.count("__") == 2 and n.endswith("calculate")), None)

    name = await eventually(two_hop_tool, timeout=30, what="the far node's skill on entry")
    assert name == "near__far__calculate"
    async with mcp_client(entry, None) as client:
        result = await client.call_tool(name, {"expression": "2+3"})
    assert not result.is_error, result.content
    assert json.loads(result.content[0].text) == 5 or result.content[0].text == "5"


async def test_without_auth_only_the_nodes_own_host_may_call(serve, tmp_path):
    card = node_card("open-node", mcp={"enabled": True})
    url = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    async with mcp_client(url, None) as client:  # the node's own address: served
        assert [t.name for t in (await client.list_tools()).tools] == ["calculate"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        rebound = await http.post(f"{url}/mcp", json=body, headers={**headers, "Host": "evil.test"})
        foreign = await http.post(
            f"{url}/mcp", json=body, headers={**headers, "Origin": "https://evil.test"}
        )
    assert rebound.status_code == 421 and foreign.status_code == 403
