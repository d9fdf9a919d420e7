"""A real a2a-sdk 0.3 client (its own venv, a subprocess) completes tasks on a live node and on
the registry's A2A endpoint, over JSON-RPC and HTTP+JSON, with auth on the node.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.card import parse_card
from node.registry import RegistrySettings, build_registry_app
from node.server.app import build_node_app
from tests.conftest import Serve

HERE = Path(__file__).parent
TOKEN = "alice-token-123"
CALC = {"skill": "calculate", "arguments": {"expression": "6*7"}}
TRANSPORTS = {"JSONRPC": "JsonRpcTransport", "HTTP+JSON": "RestTransport"}


async def legacy_client(python: Path, url: str, *args: str, timeout: float = 60.0) -> Any:
    """Run ``legacy_client.py`` with the 0.3 venv's python; its JSON answer."""
    process = await asyncio.create_subprocess_exec(
        str(python),
        str(HERE / "legacy_client.py"),
        url,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    lines = out.decode().strip().splitlines()
    assert lines, f"no output; stderr: {err.decode()[-2000:]}"
    answer = json.loads(lines[-1])
    assert process.returncode == 0 and "error" not in answer, answer
    return answer


@pytest.fixture
async def node_url(serve: Serve, tmp_path: Path) -> str:
    card = parse_card(
        {
            "id": "interop-node",
            "name": "Interop Node",
            "description": "A node called by a real a2a-sdk 0.3 client.",
            "tools": ["calculate", "text_stats"],
            "auth": {"bearer_tokens": [{"secret": "${TOKEN}", "principal": "alice"}]},
        },
        env={"TOKEN": TOKEN},
    )
    return await serve(lambda url: build_node_app(card, public_url=url, data_dir=tmp_path))


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_0_3_client_completes_a_data_task(
    legacy_python: Path, node_url: str, transport: str
) -> None:
    answer = await legacy_client(
        legacy_python,
        node_url,
        "--transport",
        transport,
        "--data",
        json.dumps(CALC),
        "--token",
        TOKEN,
    )
    assert answer["card"] == {
        "url": f"{node_url}/",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
    }
    assert answer["transport"] == TRANSPORTS[transport]
    task = answer["reply"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", task
    assert task["artifacts"][0]["parts"][0]["data"] == {"value": 42}
    assert answer["got"]["id"] == task["id"]
    assert answer["got"]["status"]["state"] == "completed"


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_0_3_client_streams_a_text_task(
    legacy_python: Path, node_url: str, transport: str
) -> None:
    answer = await legacy_client(
        legacy_python,
        node_url,
        "--transport",
        transport,
        "--text",
        "2*21",
        "--metadata",
        json.dumps({"skill": "calculate"}),
        "--token",
        TOKEN,
        "--streaming",
    )
    task = answer["reply"]
    assert task["status"]["state"] == "completed", task
    assert task["artifacts"][0]["parts"][0]["data"] == {"value": 42}


async def test_0_3_client_without_its_token_is_refused(legacy_python: Path, node_url: str) -> None:
    process = await asyncio.create_subprocess_exec(
        str(legacy_python),
        str(HERE / "legacy_client.py"),
        node_url,
        "--data",
        json.dumps(CALC),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1
    assert "401" in json.loads(out.decode().splitlines()[-1])["error"]


@pytest.fixture
async def registry_url(serve: Serve, tmp_path: Path, node_url: str) -> str:
    """A registry on loopback listing the node (its card read with the 0.3 fields on)."""

    def factory(url: str) -> Any:
        settings = RegistrySettings(
            public_url=url, db=str(tmp_path / "registry.db"), allow_cidrs=("127.0.0.0/8",)
        )
        return build_registry_app(settings)

    url = await serve(factory)
    async with httpx.AsyncClient(base_url=url) as http:
        card_url = f"{node_url}/.well-known/agent-card.json"
        response = await http.post("/v1/agents", json={"card_url": card_url})
        assert response.status_code == 201, response.text
    return url


@pytest.mark.parametrize("transport", ["JSONRPC", "HTTP+JSON"])
async def test_0_3_client_asks_the_registry(
    legacy_python: Path, registry_url: str, transport: str
) -> None:
    request = {"skill": "find_agents", "arguments": {"skill": "calculate"}}
    answer = await legacy_client(
        legacy_python, registry_url, "--transport", transport, "--data", json.dumps(request)
    )
    assert answer["card"]["url"] == f"{registry_url}/a2a"
    assert answer["transport"] == TRANSPORTS[transport]
    reply = answer["reply"]
    assert reply["kind"] == "message" and reply["role"] == "agent", reply
    (data,) = [p["data"] for p in reply["parts"] if p["kind"] == "data"]
    assert [agent["id"] for agent in data["agents"]] == ["interop-node"], data
