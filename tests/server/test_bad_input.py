"""Bad input gets the right A2A or HTTP error, and the node keeps serving."""

from __future__ import annotations

import json

import pytest
from a2a.client.errors import A2AClientError
from a2a.types import CancelTaskRequest, GetTaskRequest, SendMessageRequest, TaskState
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from node.client import NodeClient, skill_message, status_text, text_message
from tests.server.conftest import A2A_HEADERS, make_client


def rpc(method: str, params: dict, id_: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


async def still_serving(http, url: str) -> None:
    client = await make_client(http, url)
    events = [
        e
        async for e in client.send_message(
            SendMessageRequest(message=skill_message("calculate", {"expression": "1+1"}))
        )
    ]
    assert events[0].task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_malformed_json_is_a_parse_error(node_url, http):
    response = await http.post(
        node_url + "/",
        content=b"{not json",
        headers={**A2A_HEADERS, "Content-Type": "application/json"},
    )
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32700
    await still_serving(http, node_url)


async def test_non_json_content_type_is_content_type_not_supported(node_url, http):
    body = json.dumps(rpc("GetTask", {"id": "x"}))
    response = await http.post(
        node_url + "/", content=body, headers={**A2A_HEADERS, "Content-Type": "text/plain"}
    )
    assert response.json()["error"]["code"] == -32005
    await still_serving(http, node_url)


async def test_oversize_body_is_413(start_node, http):
    url = await start_node(limits={"max_body_bytes": 10_000})
    big = rpc(
        "SendMessage",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x" * 20_000}]}},
    )
    response = await http.post(url + "/", json=big, headers=A2A_HEADERS)
    assert response.status_code == 413
    await still_serving(http, url)


async def test_unknown_method_and_invalid_params(node_url, http):
    response = await http.post(node_url + "/", json=rpc("NoSuchMethod", {}), headers=A2A_HEADERS)
    assert response.json()["error"]["code"] == -32601
    response = await http.post(
        node_url + "/", json=rpc("SendMessage", {"message": {"parts": []}}), headers=A2A_HEADERS
    )
    assert response.json()["error"]["code"] == -32602
    await still_serving(http, node_url)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (skill_message("no_such_skill", {}), "unknown skill"),
        (skill_message("calculat", {"expression": "1"}), "did you mean 'calculate'"),
        (skill_message("secret_helper", {}), "unknown skill"),
        (skill_message("calculate", {"expression": [1]}), "expression"),
        (skill_message("text_stats", {"text": "x", "bogus": 1}), "bogus"),
        (skill_message("admin_only", {}), "missing capability: admin"),
    ],
    ids=["unknown", "near-miss", "internal-tool", "wrong-type", "extra-arg", "capability"],
)
async def test_requests_that_cannot_run_are_rejected_before_any_tool_runs(
    node_url, http, message, expected
):
    client = await make_client(http, node_url)
    events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert expected in status_text(task)
    assert not task.artifacts


async def test_unknown_task_id_and_cancel_of_a_finished_task(node_url, http):
    client = await make_client(http, node_url)
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))
    events = [
        e
        async for e in client.send_message(
            SendMessageRequest(message=skill_message("calculate", {"expression": "1"}))
        )
    ]
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=events[0].task.id))


async def test_a_message_to_a_terminal_task_is_refused(node_url, http):
    client = await make_client(http, node_url)
    events = [
        e
        async for e in client.send_message(
            SendMessageRequest(message=skill_message("calculate", {"expression": "1"}))
        )
    ]
    done = events[0].task
    response = await http.post(
        node_url + "/",
        json=rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": "m2",
                    "role": "ROLE_USER",
                    "taskId": done.id,
                    "contextId": done.context_id,
                    "parts": [{"text": "more"}],
                }
            },
        ),
        headers=A2A_HEADERS,
    )
    assert response.json()["error"]["code"] == -32004
    await still_serving(http, node_url)


async def test_client_ids_longer_than_36_characters_work(node_url, http):
    response = await http.post(
        node_url + "/",
        json=rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": "m" * 80,
                    "role": "ROLE_USER",
                    "contextId": "c" * 80,
                    "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "2"}}}],
                }
            },
        ),
        headers=A2A_HEADERS,
    )
    result = response.json()["result"]["task"]
    assert result["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result["contextId"] == "c" * 80


AUTH_ENV = {"ALICE_TOKEN": "alice-token-123", "BOB_KEY": "bob-api-key-456"}
AUTH = {
    "bearer_tokens": [
        {"secret": "${ALICE_TOKEN}", "principal": "alice", "capabilities": ["admin"]}
    ],
    "api_keys": [{"secret": "${BOB_KEY}", "principal": "bob"}],
}


async def test_auth_requires_credentials_except_for_card_and_health(start_node, http):
    url = await start_node(auth=AUTH, env=AUTH_ENV)
    assert (await http.get(url + "/.well-known/agent-card.json")).status_code == 200
    assert (await http.get(url + "/healthz")).status_code == 200
    body = rpc("GetTask", {"id": "x"})
    missing = await http.post(url + "/", json=body, headers=A2A_HEADERS)
    assert missing.status_code == 401
    wrong = await http.post(
        url + "/", json=body, headers={**A2A_HEADERS, "Authorization": "Bearer nope-nope-nope"}
    )
    assert wrong.status_code == 401
    assert "alice-token" not in wrong.text
    rest = await http.get(url + "/rest/tasks/x", headers=A2A_HEADERS)
    assert rest.status_code == 401


async def test_card_publishes_security_schemes_and_no_secrets(start_node, http):
    url = await start_node(auth=AUTH, env=AUTH_ENV)
    card = (await http.get(url + "/.well-known/agent-card.json")).json()
    assert set(card["securitySchemes"]) == {"bearer", "apiKey"}
    text = json.dumps(card)
    assert "alice-token-123" not in text and "bob-api-key-456" not in text


async def test_tasks_are_scoped_to_their_principal_and_capabilities_apply(start_node, apps):
    url = await start_node(auth=AUTH, env=AUTH_ENV)
    # one http client per caller: connect() sets the caller's credentials on it
    async with (
        apps.client() as http,
        NodeClient.connect(url, token="alice-token-123", streaming=False, http=http) as alice,
    ):
        task = await alice.call("admin_only")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        mine = await alice.get(task.id)
        assert mine.id == task.id
    async with (
        apps.client() as http,
        NodeClient.connect(url, api_key="bob-api-key-456", streaming=False, http=http) as bob,
    ):
        with pytest.raises(TaskNotFoundError):
            await bob.get(task.id)
        refused = await bob.call("admin_only")
        assert refused.status.state == TaskState.TASK_STATE_REJECTED
        assert "missing capability: admin" in status_text(refused)
    with pytest.raises(A2AClientError):
        async with (
            apps.client() as http,
            NodeClient.connect(url, token="wrong-token-000", streaming=False, http=http) as nobody,
        ):
            await nobody.send(text_message("hi"))
