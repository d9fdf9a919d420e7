"""The plain a2a-sdk 0.3 server other tests call as a peer answers as its docstring says."""

from __future__ import annotations

import httpx
import pytest

from tests.interop.conftest import LegacyServer


def _send(text: str, metadata: dict[str, str] | None = None) -> dict[str, object]:
    message: dict[str, object] = {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "text", "text": text}, {"kind": "data", "data": {"n": 1}}],
    }
    if metadata:
        message["metadata"] = metadata
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


@pytest.mark.parametrize("reply", ["task", "message"])
def test_legacy_server_answers_text_and_reports_data(
    legacy_server: LegacyServer, reply: str
) -> None:
    url = legacy_server(reply=reply)
    card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    assert card["url"] == f"{url}/"
    assert card["protocolVersion"].startswith("0.3")
    assert [s["id"] for s in card["skills"]] == ["echo", "shout"]

    result = httpx.post(f"{url}/", json=_send("hi", {"skill": "shout"})).json()["result"]
    assert result["kind"] == reply
    parts = result["artifacts"][0]["parts"] if reply == "task" else result["parts"]
    assert parts == [
        {"kind": "text", "text": "HI"},
        {"kind": "data", "data": {"received": [{"n": 1}]}},
    ]


def test_legacy_server_requires_its_bearer_token(legacy_server: LegacyServer) -> None:
    url = legacy_server(bearer="s3cret", preferred="HTTP+JSON")
    card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    assert card["url"] == f"{url}/rest"
    assert card["security"] == [{"bearer": []}]
    assert httpx.post(f"{url}/", json=_send("hi")).status_code == 401
    answer = httpx.post(
        f"{url}/", json=_send("hi"), headers={"Authorization": "Bearer s3cret"}
    ).json()
    assert answer["result"]["artifacts"][0]["parts"][0]["text"] == "echo: hi"
