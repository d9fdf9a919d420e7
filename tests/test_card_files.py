"""Every card in cards/ loads, and the committed card schema is current."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.card import card_schema_text, load_card, parse_card
from node.errors import ConfigError
from node.server.agent_card import build_agent_card
from node.server.assembly import assemble_tools

CARDS = Path(__file__).resolve().parent.parent / "cards"
TEST_ENV = {
    "FILES_NODE_ADMIN_TOKEN": "admin-token-xyz",
    "FILES_NODE_READER_TOKEN": "reader-token-xyz",
}


def test_card_schema_is_current():
    committed = (CARDS / "card.schema.json").read_text()
    assert committed == card_schema_text(), (
        "regenerate: python -m node.card > cards/card.schema.json"
    )


@pytest.mark.parametrize("path", sorted(CARDS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_card_loads_and_builds_its_agent_card(path, tmp_path):
    card = load_card(path, env=TEST_ENV)
    tools = assemble_tools(card, tmp_path)
    agent_card = build_agent_card(card, tools.skill_specs(), "http://127.0.0.1:1")
    assert agent_card.name == card.name
    assert {s.id for s in agent_card.skills} == set(tools.skills())


def test_errors_name_the_file_and_the_yaml_path(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("id: Bad Id\nname: x\ndescription: y\nlimits: {max_body_bytes: -1}\n")
    with pytest.raises(ConfigError) as err:
        load_card(path)
    message = str(err.value)
    assert f"{path}: id:" in message
    assert f"{path}: limits.max_body_bytes:" in message


def test_env_interpolation_and_missing_variables():
    data = {
        "id": "n",
        "name": "${NAME:-Default}",
        "description": "d",
        "auth": {"bearer_tokens": [{"secret": "${TOKEN}", "principal": "p"}]},
    }
    card = parse_card(data, env={"TOKEN": "s3cret-token"})
    assert card.name == "Default"
    assert card.auth.bearer_tokens[0].secret.get_secret_value() == "s3cret-token"
    assert "s3cret-token" not in repr(card)
    with pytest.raises(ConfigError, match="TOKEN is not set"):
        parse_card(data, env={})


def test_unknown_fields_and_unknown_tools_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="tool_s"):
        parse_card({"id": "n", "name": "n", "description": "d", "tool_s": []}, env={})
    card = parse_card({"id": "n", "name": "n", "description": "d", "tools": ["nope"]}, env={})
    with pytest.raises(ConfigError, match="unknown tool 'nope'"):
        assemble_tools(card, tmp_path)
