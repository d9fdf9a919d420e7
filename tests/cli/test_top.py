"""``a2a-node top``: a real registry, real nodes' ``/metrics``, and one agent that went away."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from node.card import AuthSettings, Credential, load_card
from node.cli.top import Sample, scrape_agents
from node.client import NodeClient, skill_message
from node.registry import RegistrySettings
from node.registry.app import build_registry_app
from node.server.app import build_node_app
from tests.cli.clisupport import CARDS, DATA_CARD, cli
from tests.cli.gates import gate, gated
from tests.servers import free_socket, running


async def register(registry: str, node: str) -> None:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{registry}/v1/agents", json={"card_url": f"{node}/.well-known/agent-card.json"}
        )
        assert answer.status_code in (200, 201), answer.text


@pytest.fixture
async def network(serve, tmp_path: Path) -> dict[str, str]:
    """A registry listing the data node (with ``gate``) and the text node, which has stopped."""
    registry = await serve(
        lambda u: build_registry_app(
            RegistrySettings(public_url=u, db=str(tmp_path / "r.db"), allow_cidrs=("127.0.0.0/8",))
        )
    )
    data = await serve(
        lambda u: build_node_app(
            load_card(DATA_CARD),
            public_url=u,
            data_dir=tmp_path / "d",
            store="memory",
            tools=[gate],
        )
    )
    await register(registry, data)
    sock = free_socket()
    text_app = build_node_app(
        load_card(CARDS / "text.yaml"),
        public_url=f"http://127.0.0.1:{sock.getsockname()[1]}",
        data_dir=tmp_path / "t",
        store="memory",
    )
    async with running(text_app, sock) as text:
        await register(registry, text)
    return {"registry": registry, "data": data, "text": text}


async def test_top_once_shows_each_agents_load_from_its_metrics(network):
    async with NodeClient.connect(network["data"], streaming=False) as node:
        for expression in ("1+1", "2*3", "1/0"):
            await node.send(skill_message("calculate", {"expression": expression}))
        async with gated("held"):
            held = await anext(
                node.events(skill_message("gate", {"name": "held"}), return_immediately=True)
            )
            assert held.HasField("task")
            code, out, err = await cli("top", network["registry"], "--json", "--interval", "0.2")
    assert code == 0, err
    agents = {a["id"]: a for a in json.loads(out)}
    assert set(agents) == {"data", "text"}
    data, text = agents["data"], agents["text"]
    assert data["url"] == network["data"] and data["healthy"] is True
    metrics = data["metrics"]
    assert (metrics["completed"], metrics["failed"], metrics["in_flight"]) == (2, 1, 1)
    assert metrics["tool_calls"] >= 3 and metrics["tool_calls_per_s"] >= 0
    assert text["metrics"] is None and "ConnectError" in text["metrics_error"]


async def test_top_once_prints_a_table_with_a_dash_for_an_unreachable_agent(network):
    async with NodeClient.connect(network["data"], streaming=False) as node:
        await node.send(skill_message("calculate", {"expression": "6*7"}))
    code, out, err = await cli("top", network["registry"], "--once", "--interval", "0")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == [
        "ID", "URL", "HEALTH", "IN", "FLIGHT", "COMPLETED", "FAILED", "TOOL", "CALLS", "CALLS/S"
    ]  # fmt: skip
    by_id = {row.split()[0]: row.split() for row in rows}
    assert by_id["data"][1:] == [network["data"], "healthy", "0", "1", "0", "1", "—"]
    assert by_id["text"][1:] == [network["text"], "healthy", "—", "—", "—", "—", "—"]


async def test_top_refreshes_until_interrupted(network):
    from tests.cli.clisupport import running as running_cli

    async with running_cli("top", network["registry"], "--interval", "0.2") as top:
        await top.wait_for_line("2 agents")
        await top.wait_for_line("2 agents")  # a second round
        assert await top.stop() == 0


async def test_top_rates_tool_calls_between_two_samples():
    """The rate is the tool calls between the previous sample and this one, per second."""

    def metrics(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text='a2a_node_tool_calls_total{tool="x",outcome="ok"} 12\n')

    before = Sample(in_flight=0, completed=0, failed=0, tool_calls=2, at=time.monotonic() - 5)
    agent = {"id": "a", "name": "A", "card_url": "http://a.test/.well-known/agent-card.json"}
    async with httpx.AsyncClient(transport=httpx.MockTransport(metrics)) as http:
        (load,) = await scrape_agents(http, [agent], {"a": before}, concurrency=1, timeout_s=1)
    assert load.sample is not None and load.sample.tool_calls == 12
    assert load.rate is not None and 1.9 < load.rate <= 2.0  # 10 calls in a bit over 5 s


async def test_top_needs_a_reachable_registry():
    sock = free_socket()  # bound, not listening: refused
    code, _, err = await cli("top", f"http://127.0.0.1:{sock.getsockname()[1]}", "--once")
    sock.close()
    assert code == 1 and "cannot list agents" in err and "Traceback" not in err


async def test_top_sends_the_nodes_credentials_to_read_their_metrics(serve, tmp_path):
    registry = await serve(
        lambda u: build_registry_app(
            RegistrySettings(public_url=u, db=str(tmp_path / "r.db"), allow_cidrs=("127.0.0.0/8",))
        )
    )
    ops = Credential(secret=SecretStr("top-secret-token"), principal="ops")
    card = load_card(DATA_CARD).model_copy(update={"auth": AuthSettings(bearer_tokens=[ops])})
    node = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    await register(registry, node)
    async with NodeClient.connect(node, streaming=False, token="top-secret-token") as client:
        await client.send(skill_message("calculate", {"expression": "6*7"}))

    code, out, err = await cli("top", registry, "--json", "--interval", "0")
    (agent,) = json.loads(out)
    assert code == 0 and agent["metrics"] is None and "401" in agent["metrics_error"], err

    code, out, err = await cli(
        "top", registry, "--json", "--interval", "0", "--token", "top-secret-token"
    )
    (agent,) = json.loads(out)
    assert code == 0 and agent["metrics"]["completed"] == 1, err


async def test_top_refuses_a_negative_interval_or_a_busy_loop():
    code, _, err = await cli("top", "http://127.0.0.1:9", "--interval", "-1")
    assert code == 2 and "--interval must be 0 or more" in err
    code, _, err = await cli("top", "http://127.0.0.1:9", "--interval", "0")
    assert code == 2 and "--once" in err
