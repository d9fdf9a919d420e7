"""A2A 0.3 beside 1.0 (node.server.v0_3): the served card in both modes, and 0.3 on the wire.

By default the card carries the 0.3 fields (checked with the 0.3 model as 0.3 clients do, and with
the 1.0 model as the 1.3 client reads it) and 0.3 methods are served on JSON-RPC and REST;
``server.a2a_v0_3: false`` gives a strict 1.0 card (no field the 1.0 model does not know) and
1.0 only.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.compat.v0_3 import types as v03
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict, ParseError
from pydantic import ValidationError

CARD_PATH = "/.well-known/agent-card.json"
CALC = {"skill": "calculate", "arguments": {"expression": "6*7"}}


def message_v03(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A 0.3 message (``kind`` fields, lowercase role), as an a2a-sdk 0.3 client sends it."""
    return {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": list(parts) or [{"kind": "data", "data": CALC}],
        **fields,
    }


def rpc(method: str, params: dict[str, Any], id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


async def test_default_card_reads_as_0_3_and_as_1_0(node_url: str, http: httpx.AsyncClient) -> None:
    body = (await http.get(node_url + CARD_PATH)).json()

    legacy = v03.AgentCard.model_validate(body)
    assert legacy.url == f"{node_url}/"
    assert legacy.preferred_transport == "JSONRPC"
    assert legacy.protocol_version == "0.3"
    assert [(i.transport, i.url) for i in legacy.additional_interfaces or []] == [
        ("HTTP+JSON", f"{node_url}/rest")
    ]
    assert "calculate" in {s.id for s in legacy.skills}

    card = ParseDict(body, AgentCard(), ignore_unknown_fields=True)  # as the 1.3 client reads it
    assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    ]


async def test_strict_card_is_pure_1_0_and_refused_by_0_3(
    start_node: Any, http: httpx.AsyncClient
) -> None:
    url = await start_node(server={"a2a_v0_3": False})
    body = (await http.get(url + CARD_PATH)).json()

    card = ParseDict(body, AgentCard())  # no field the 1.0 model does not know
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0"}
    assert not {"url", "preferredTransport", "protocolVersion", "additionalInterfaces"} & set(body)
    with pytest.raises(ValidationError, match="url"):
        v03.AgentCard.model_validate(body)


async def test_default_card_is_not_strict_1_0(node_url: str, http: httpx.AsyncClient) -> None:
    """The trade (docs: README, card schema): the 0.3 fields are unknown to the 1.0 model."""
    body = (await http.get(node_url + CARD_PATH)).json()
    with pytest.raises(ParseError, match="has no field named"):
        ParseDict(body, AgentCard())


async def test_0_3_json_rpc_send_and_get_without_a_version_header(
    node_url: str, http: httpx.AsyncClient
) -> None:
    sent = await http.post(node_url + "/", json=rpc("message/send", {"message": message_v03()}))
    task = sent.json()["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    # a number is no 0.3 data part (an object): the SDK wraps it, marked for 0.3-aware readers
    assert task["artifacts"][0]["parts"] == [
        {"kind": "data", "data": {"value": 42}, "metadata": {"data_part_compat": True}}
    ]

    got = await http.post(node_url + "/", json=rpc("tasks/get", {"id": task["id"]}, 2))
    assert got.json()["result"]["status"]["state"] == "completed"
    assert got.json()["result"]["id"] == task["id"]


async def test_0_3_text_with_metadata_skill(node_url: str, http: httpx.AsyncClient) -> None:
    text = message_v03({"kind": "text", "text": "2*21"}, metadata={"skill": "calculate"})
    task = (await http.post(node_url + "/", json=rpc("message/send", {"message": text}))).json()
    assert task["result"]["status"]["state"] == "completed", task
    assert task["result"]["artifacts"][0]["parts"][0]["data"] == {"value": 42}


async def test_0_3_rest_send_and_get(node_url: str, http: httpx.AsyncClient) -> None:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "content": [{"data": {"data": CALC}}],
    }
    sent = await http.post(
        node_url + "/rest/v1/message:send",
        json={"request": message, "configuration": {"blocking": True}},
    )
    assert sent.status_code == 200, sent.text
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task

    got = await http.get(f"{node_url}/rest/v1/tasks/{task['id']}")
    assert got.status_code == 200, got.text
    assert got.json()["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_strict_node_refuses_0_3_methods_and_paths(
    start_node: Any, http: httpx.AsyncClient
) -> None:
    url = await start_node(server={"a2a_v0_3": False})
    answer = (
        await http.post(url + "/", json=rpc("message/send", {"message": message_v03()}))
    ).json()
    assert answer["error"]["code"] == -32601
    rest = await http.post(url + "/rest/v1/message:send", json={"request": {}})
    assert 400 <= rest.status_code < 500
