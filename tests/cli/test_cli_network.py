"""``a2a-node agents``: a registry's agents for people and for scripts, and using what it prints."""

from __future__ import annotations

import json

import httpx

from node.card import load_card
from node.registry import RegistrySettings
from node.registry.app import build_registry_app
from node.server.app import build_node_app
from tests.cli.clisupport import DATA_CARD, cli


async def test_agents_prints_json_and_send_takes_the_card_url_it_prints(serve, tmp_path):
    registry = await serve(
        lambda u: build_registry_app(
            RegistrySettings(public_url=u, db=str(tmp_path / "r.db"), allow_cidrs=("127.0.0.0/8",))
        )
    )
    card = load_card(DATA_CARD)
    node = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{registry}/v1/agents", json={"card_url": f"{node}/.well-known/agent-card.json"}
        )
        assert answer.status_code in (200, 201), answer.text

    code, out, err = await cli("agents", registry, "--skill", "calculate", "--json")
    assert code == 0, err
    (agent,) = json.loads(out)
    assert agent["id"] == "data" and agent["card_url"].endswith("/agent-card.json")

    code, out, _ = await cli("agents", registry, "--skill", "calculate")
    assert code == 0 and "data" in out and node in out

    code, out, err = await cli(
        "send", agent["card_url"], "--skill", "calculate", "--arg", "expression=6*7"
    )
    assert (code, out) == (0, "--- calculate\n42\n"), err
