"""The registry's A2A endpoint serves A2A 0.3 beside 1.0 (node.server.v0_3), or strict 1.0."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.compat.v0_3 import types as v03
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict
from pydantic import ValidationError

from node.registry import RegistrySettings, build_registry_app
from tests.registry.conftest import in_process

CARD = "/.well-known/agent-card.json"
FIND = {"skill": "find_agents", "arguments": {"tag": "math"}}


def send_v03(method: str = "message/send") -> dict[str, object]:
    message = {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "data", "data": FIND}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


async def test_registry_card_and_endpoint_speak_0_3_by_default(tmp_path: Path) -> None:
    settings = RegistrySettings(public_url="http://registry", db=str(tmp_path / "r.db"))
    async with in_process(build_registry_app(settings)) as client:
        body = (await client.get(CARD)).json()
        legacy = v03.AgentCard.model_validate(body)
        assert legacy.url == "http://registry/a2a"
        assert [(i.transport, i.url) for i in legacy.additional_interfaces or []] == [
            ("HTTP+JSON", "http://registry/a2a/rest")
        ]
        ParseDict(body, AgentCard(), ignore_unknown_fields=True)

        reply = (await client.post("/a2a", json=send_v03())).json()["result"]
        assert reply["kind"] == "message" and reply["role"] == "agent", reply
        rest = await client.post(
            "/a2a/rest/v1/message:send",
            json={"request": {"messageId": "m-2", "role": "ROLE_USER", "content": [{"text": "x"}]}},
        )
        assert rest.status_code == 200, rest.text
        assert rest.json()["message"]["content"][-1] == {"text": "found 0 agents"}


async def test_strict_registry_card_is_pure_1_0(tmp_path: Path) -> None:
    settings = RegistrySettings(db=str(tmp_path / "r.db"), a2a_v0_3=False)
    async with in_process(build_registry_app(settings)) as client:
        body = (await client.get(CARD)).json()
        card = ParseDict(body, AgentCard())  # no field the 1.0 model does not know
        assert {i.protocol_version for i in card.supported_interfaces} == {"1.0"}
        with pytest.raises(ValidationError, match="url"):
            v03.AgentCard.model_validate(body)
        answer = (await client.post("/a2a", json=send_v03())).json()
        assert answer["error"]["code"] == -32601
