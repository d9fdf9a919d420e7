"""A node with MCP servers: published MCP tools on its card, /readyz, a pipeline over MCP and a
peer, the ``tools`` command, and ``mcp-stdio`` driven by the official client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.peers.cards import skill_schemas
from node.server.app import build_node_app
from tests.mcp.conftest import SERVER, eventually
from tests.mcp.test_mcp_endpoint import agent_card

ROOT = Path(__file__).resolve().parents[2]


def mcp_entry(name: str = "t", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(SERVER), "stdio"], **extra}


def card(node_id: str, **extra: Any) -> Any:
    base = {"id": node_id, "name": node_id, "description": "A node under test.", **extra}
    return parse_card(base, env={})


async def test_published_mcp_tools_are_skills_and_readyz_shows_the_servers(serve, tmp_path):
    node = card(
        "mcp-tools",
        mcp_servers=[
            mcp_entry(tools=[{"name": "add", "scope": "public", "tags": ["math"]}]),
            mcp_entry("never", command="/nonexistent/server", args=[]),
        ],
    )
    url = await serve(
        lambda u: build_node_app(node, public_url=u, data_dir=tmp_path, store="memory")
    )

    async def published() -> Any:
        found = await agent_card(url)
        return found if [s.id for s in found.skills] == ["mcp_t_add"] else None

    found = await eventually(published, what="mcp_t_add on the card")
    assert skill_schemas(found)["mcp_t_add"]["required"] == ["a", "b"]
    async with httpx.AsyncClient() as http:
        ready = (await http.get(f"{url}/readyz")).json()
    assert ready["ready"] is True
    assert ready["mcp_servers"]["t"]["state"] == "connected"
    assert ready["mcp_servers"]["never"]["state"] == "down"
    async with NodeClient.connect(url, streaming=False) as client:
        task = await client.call("mcp_t_add", {"a": 20, "b": 22})
        assert artifacts_of(task)["mcp_t_add"] == [{"result": 42}], status_text(task)
        internal = await client.call("mcp_t_boom", {})
        assert "mcp_t_boom" in status_text(internal)  # internal tools are not skills


async def test_a_pipeline_whose_steps_are_an_mcp_tool_and_a_peer_tool(serve, tmp_path):
    data = await serve(
        lambda u: build_node_app(
            card("data", tools=["json_query"]),
            public_url=u,
            data_dir=tmp_path / "d",
            store="memory",
        )
    )
    pipeline = {
        "id": "add_then_read",
        "description": "Add on the MCP server, then read the sum back on the data node.",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "steps": [
            {"id": "sum", "tool": "mcp_t_add", "arguments": {"a": "$input/a", "b": "$input/b"}},
            {"id": "twice", "tool": "data__json_query",
             "arguments": {"expression": "result", "data": "$steps/sum"}},
        ],
        "output": ["sum", "twice"],
    }  # fmt: skip
    node = card(
        "mixer",
        mcp_servers=[mcp_entry()],
        pipelines=[pipeline],
        peers={"static": [{"url": data}]},
    )
    url = await serve(
        lambda u: build_node_app(node, public_url=u, data_dir=tmp_path, store="memory")
    )
    async with httpx.AsyncClient() as http:

        async def connected() -> bool:
            state = (await http.get(f"{url}/readyz")).json()["mcp_servers"]["t"]["state"]
            return state == "connected"

        await eventually(connected, what="the MCP server connected")
    async with NodeClient.connect(url, streaming=False) as client:
        task = await eventually(lambda: _completed(client.call("add_then_read", {"a": 2, "b": 3})))
    (report,) = artifacts_of(task)["add_then_read"]
    assert report["sum"] == {"result": 5}
    assert report["twice"] == 5


def test_the_tools_command_lists_mcp_tools_with_their_server(tmp_path):
    path = tmp_path / "card.yaml"
    servers = [mcp_entry(enabled_tools=["add", "pid"])]
    path.write_text(
        json.dumps({"id": "l", "name": "l", "description": "d", "mcp_servers": servers})
    )
    command = ["tools", str(path), "--data-dir", str(tmp_path), "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "node.cli", *command],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=True,
    )  # fmt: skip
    listed = {t["name"]: t for t in json.loads(out.stdout)}
    assert set(listed) == {"mcp_t_add", "mcp_t_pid"}
    assert listed["mcp_t_add"]["mcp_server"] == "t" and listed["mcp_t_add"]["scope"] == "internal"


async def test_mcp_stdio_serves_the_cards_skills(tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "node.cli", "mcp-stdio", str(ROOT / "cards" / "data.yaml"),
              "--store", "memory", "--data-dir", str(tmp_path)],
        cwd=str(ROOT),
    )  # fmt: skip
    async with Client(params, read_timeout_seconds=30) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("calculate", {"expression": "2 ** 10"})
    assert "calculate" in names
    assert not result.is_error and result.content[0].text == "1024"


async def _completed(call: Any) -> Any:
    """The task when it completed (the peer may not be discovered yet), else None."""
    task = await call
    return task if task.status.state == 3 else None  # TASK_STATE_COMPLETED
