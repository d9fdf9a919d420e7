"""One agent-id rule: a node's card and the registry accept the same ids."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from node.card import NodeCard
from node.protocol import AGENT_ID_PATTERN
from node.registry.errors import BadRequest
from node.registry.service import check_agent_id


@pytest.mark.parametrize("agent_id", ["calc", "web-1", "a_b", "0" * 63])
def test_an_id_a_card_may_have_is_one_the_registry_accepts(agent_id: str) -> None:
    assert AGENT_ID_PATTERN.match(agent_id)
    NodeCard.model_validate({"id": agent_id, "name": "N", "description": "d"})
    assert check_agent_id(agent_id) == agent_id


@pytest.mark.parametrize("agent_id", ["Calc", "a.b", "-a", "0" * 64, ""])
def test_an_id_a_card_may_not_have_is_refused_by_the_registry(agent_id: str) -> None:
    with pytest.raises(ValidationError):
        NodeCard.model_validate({"id": agent_id, "name": "N", "description": "d"})
    with pytest.raises(BadRequest):
        check_agent_id(agent_id)
