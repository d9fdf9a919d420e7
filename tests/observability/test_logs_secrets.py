"""No secret in any log line: two real nodes at ``--log-level debug``, JSON logs, every credential.

``calc`` requires a bearer token or an API key; ``hub`` calls ``calc`` as a peer with its own
token and pushes events to a webhook with a notification token and credentials (a closed port:
the deliveries fail and are retried, which logs). Requests go with valid and invalid bearer tokens
and API keys, over JSON-RPC and gRPC. Then every line of both logs is searched for every secret.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2, a2a_pb2_grpc
from google.protobuf.json_format import ParseDict

from node.network.children import Child
from tests.network.netsupport import CLI, Processes, free_ports, wait_for

pytestmark = pytest.mark.network

SECRETS = {
    "CALC_BEARER": "calc-bearer-secret-0123456789",
    "CALC_KEY": "calc-apikey-secret-0123456789",
    "HUB_KEY": "hub-apikey-secret-0123456789",
}
WRONG_BEARER = "wrong-bearer-secret-9876543210"
WRONG_KEY = "wrong-apikey-secret-9876543210"
PUSH_TOKEN = "push-token-secret-abcdef123"
PUSH_CREDENTIALS = "push-credentials-secret-abcdef123"
TRACEPARENT = "00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def calc_card(grpc_port: int) -> dict[str, Any]:
    return {
        "id": "calc",
        "name": "Calc",
        "description": "Arithmetic behind credentials.",
        "tools": ["calculate"],
        "server": {"grpc_port": grpc_port},
        "auth": {
            "bearer_tokens": [{"secret": "${CALC_BEARER}", "principal": "hub"}],
            "api_keys": [{"secret": "${CALC_KEY}", "principal": "ops"}],
        },
    }


def hub_card(calc_url: str) -> dict[str, Any]:
    return {
        "id": "hub",
        "name": "Hub",
        "description": "Calls calc with its token.",
        "peers": {"static": [{"url": calc_url, "token_env": "CALC_BEARER", "expose": True}]},
        "network": {"allow_cidrs": ["127.0.0.0/8"]},
        "push": {"backoff_s": 0.05, "max_backoff_s": 0.1, "max_attempts": 2},
        "auth": {"api_keys": [{"secret": "${HUB_KEY}", "principal": "client"}]},
    }


def send_body(skill: str, push_url: str | None = None) -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": skill, "arguments": {"expression": "6 * 7"}}}],
    }
    params: dict[str, Any] = {"message": message}
    if push_url is not None:
        config = {
            "url": push_url,
            "token": PUSH_TOKEN,
            "authentication": {"scheme": "Bearer", "credentials": PUSH_CREDENTIALS},
        }
        params["configuration"] = {"taskPushNotificationConfig": config}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}


async def grpc_send(address: str, metadata: list[tuple[str, str]]) -> grpc.StatusCode:
    request = ParseDict(send_body("calculate")["params"], a2a_pb2.SendMessageRequest())
    async with grpc.aio.insecure_channel(address) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        try:
            await stub.SendMessage(request, metadata=[("a2a-version", "1.0"), *metadata])
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


async def test_no_secret_reaches_any_log_line(tmp_path: Path) -> None:
    calc_port, calc_grpc, hub_port, closed = free_ports(4)
    calc, hub = f"http://127.0.0.1:{calc_port}", f"http://127.0.0.1:{hub_port}"
    procs = Processes(tmp_path)
    procs.env.update(SECRETS)

    async def node(data: dict[str, Any], port: int) -> Child:
        argv = [*CLI, "--log-level", "debug", "serve", str(procs.write_card(data))]
        argv += ["--port", str(port), "--data-dir", str(tmp_path / data["id"])]
        return await procs.start(data["id"], [*argv, "--log-format", "json"])

    try:
        calc_child = await node(calc_card(calc_grpc), calc_port)
        hub_child = await node(hub_card(calc), hub_port)
        for child, url in ((calc_child, calc), (hub_child, hub)):
            await procs.ready(child, url + "/readyz", timeout=90.0)
        headers = {"A2A-Version": "1.0", "traceparent": TRACEPARENT}
        async with httpx.AsyncClient(timeout=30.0) as http:
            for auth in (
                {"Authorization": f"Bearer {SECRETS['CALC_BEARER']}"},
                {"X-API-Key": SECRETS["CALC_KEY"]},
                {"Authorization": f"Bearer {WRONG_BEARER}"},
                {"X-API-Key": WRONG_KEY},
            ):
                await http.post(
                    calc + "/", json=send_body("calculate"), headers={**headers, **auth}
                )

            async def hub_calls_calc() -> bool:
                reply = await http.post(
                    hub + "/",
                    json=send_body("calc__calculate", f"http://127.0.0.1:{closed}/hook"),
                    headers={**headers, "X-API-Key": SECRETS["HUB_KEY"]},
                )
                task = reply.json()["result"]["task"]
                return task["status"]["state"] == "TASK_STATE_COMPLETED"

            await wait_for(hub_calls_calc, timeout=30.0, what="hub to call calc")
        address = f"127.0.0.1:{calc_grpc}"
        assert await grpc_send(address, [("authorization", f"Bearer {WRONG_BEARER}")]) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
        assert await grpc_send(address, [("x-api-key", SECRETS["CALC_KEY"])]) == grpc.StatusCode.OK
    finally:
        await procs.close()

    secrets = [*SECRETS.values(), WRONG_BEARER, WRONG_KEY, PUSH_TOKEN, PUSH_CREDENTIALS]
    for child in (calc_child, hub_child):
        text = child.log_path.read_text(encoding="utf-8")
        records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        assert len(records) > 20, f"{child.name}: too few lines to mean anything"
        leaked = [(s, line) for line in text.splitlines() for s in secrets if s in line]
        assert not leaked, leaked[:3]
        assert any(r.get("principal") for r in records), child.name  # the fields are there
