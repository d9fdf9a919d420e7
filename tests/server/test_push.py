"""Push notifications: webhooks per task, delivered from the background to a real receiver.

The node runs in-process; its dispatcher posts over real sockets to a receiver on a loopback port
(allowed only through the card's ``network.allow_cidrs``, as for ``http_fetch``).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import TaskPushNotificationConfig

from node.card import parse_card
from node.server.app import NodeState, build_node_app
from tests.server.conftest import A2A_HEADERS, TEST_TOOLS, card_data
from tests.server.push_receiver import Receiver, eventually
from tests.servers import InProcessApps, free_socket, running, url_of

LOOPBACK = {"allow_cidrs": ["127.0.0.0/8"]}
QUICK = {"backoff_s": 0.05, "max_backoff_s": 0.2, "timeout_s": 3.0}
STATES = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL", "")


class Nodes:
    """Start push-enabled nodes in-process and keep each one's :class:`NodeState`."""

    def __init__(self, apps: InProcessApps, tmp_path: Path) -> None:
        self.apps, self.tmp_path = apps, tmp_path

    def factory(self, store: str, env: dict[str, str], overrides: dict[str, Any]) -> Any:
        overrides.setdefault("network", LOOPBACK)
        overrides.setdefault("push", QUICK)
        card = parse_card(card_data(**overrides), env=env)
        self.last: NodeState | None = None
        data_dir = self.tmp_path / uuid.uuid4().hex[:8]  # one per factory: restarts share it

        def build(url: str) -> Any:
            app = build_node_app(
                card, public_url=url, data_dir=data_dir, store=store, tools=TEST_TOOLS
            )
            self.last = app.state.node
            return app

        return build

    async def start(
        self, store: str = "sqlite", env: dict[str, str] | None = None, **overrides: Any
    ) -> tuple[str, NodeState]:
        url = await self.apps.start(self.factory(store, env or {}, overrides), name="push")
        assert self.last is not None
        return url, self.last


@pytest.fixture
def nodes(apps: InProcessApps, tmp_path: Path) -> Nodes:
    return Nodes(apps, tmp_path)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    hooks = Receiver()
    async with running(hooks.app(), free_socket()) as url:
        yield hooks, url
        hooks.release()


async def rpc(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], **headers: str
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply: dict[str, Any] = (
        await http.post(url + "/", json=body, headers={**A2A_HEADERS, **headers})
    ).json()
    return reply


def send_params(push: dict[str, Any] | None = None, **configuration: Any) -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "2+3"}}}],
    }
    if push is not None:
        configuration["taskPushNotificationConfig"] = push
    return {"message": message, "configuration": configuration}


async def send(
    http: httpx.AsyncClient, url: str, push: dict[str, Any] | None = None, **headers: str
) -> dict[str, Any]:
    reply = await rpc(http, url, "SendMessage", send_params(push), **headers)
    task: dict[str, Any] = reply["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task


def states(hooks: Receiver) -> list[str]:
    return [r.state for r in hooks.requests if r.state is not None]


# -- the card ------------------------------------------------------------------------------


async def test_the_card_says_push_is_on_and_a_card_setting_turns_it_off(nodes, http, receiver):
    url, _ = await nodes.start()
    card = (await http.get(url + "/.well-known/agent-card.json")).json()
    assert card["capabilities"]["pushNotifications"] is True

    off_url, node = await nodes.start(push={"enabled": False})
    card = (await http.get(off_url + "/.well-known/agent-card.json")).json()
    assert card["capabilities"].get("pushNotifications", False) is False
    assert node.push is None
    hooks, hook_url = receiver
    reply = await rpc(http, off_url, "SendMessage", send_params({"url": f"{hook_url}/hook/a"}))
    assert reply["error"]["code"] == -32003
    task = await send(http, off_url)
    config = {"taskId": task["id"], "url": f"{hook_url}/hook/a"}
    reply = await rpc(http, off_url, "CreateTaskPushNotificationConfig", config)
    assert reply["error"]["code"] == -32003
    assert hooks.requests == []


# -- delivery ------------------------------------------------------------------------------


async def test_events_arrive_in_order_with_the_configured_authentication(nodes, http, receiver):
    hooks, hook_url = receiver
    url, node = await nodes.start()
    push = {
        "url": f"{hook_url}/hook/a?k=1",
        "token": "notif-token-123",
        "authentication": {"scheme": "Bearer", "credentials": "cred-456"},
    }
    task = await send(http, url, push)
    await eventually(lambda: states(hooks)[-1:] == ["TASK_STATE_COMPLETED"], what="completed")

    seen = states(hooks)
    assert seen == sorted(seen, key=STATES.index)  # never out of order
    assert seen[0] == "TASK_STATE_SUBMITTED" and "TASK_STATE_WORKING" in seen
    kinds = [next(iter(r.body)) for r in hooks.requests]
    assert "artifactUpdate" in kinds
    assert kinds.index("artifactUpdate") < len(kinds) - 1  # the result before the final status
    for request in hooks.requests:
        assert request.path == "/hook/a"
        assert request.headers["x-a2a-notification-token"] == "notif-token-123"
        assert request.headers["authorization"] == "Bearer cred-456"
        event = next(iter(request.body.values()))
        assert event.get("taskId", event.get("id")) == task["id"]
    assert node.push is not None
    await eventually(lambda: node.push.dispatcher.pending == 0)
    assert node.push.dispatcher.stats.delivered == len(hooks.requests)
    assert node.push.dispatcher.stats.failed == 0


async def test_a_receiver_that_is_down_gets_the_events_once_it_is_back(nodes, http, caplog):
    caplog.set_level(logging.INFO, logger="node.server.push_delivery")
    sock = free_socket()  # bound, not listening: connections are refused
    url, node = await nodes.start(push={**QUICK, "max_attempts": 20})
    await send(http, url, {"url": f"{url_of(sock)}/hook/late", "token": "t-late-1"})
    await eventually(lambda: "failed: ToolExecutionError" in caplog.text, what="a failed try")

    hooks = Receiver()
    async with running(hooks.app(), sock):
        await eventually(lambda: states(hooks)[-1:] == ["TASK_STATE_COMPLETED"], what="completed")
    seen = states(hooks)
    assert seen == sorted(seen, key=STATES.index)
    assert node.push is not None and node.push.dispatcher.stats.failed == 0
    assert "t-late-1" not in caplog.text  # no secrets in logs


async def test_a_hanging_receiver_never_slows_the_task(nodes, http, receiver):
    hooks, hook_url = receiver
    hooks.mode = "hang"
    timeout = 2.0
    url, node = await nodes.start(push={**QUICK, "timeout_s": timeout, "max_attempts": 1})
    started = time.monotonic()
    await send(http, url, {"url": f"{hook_url}/hook/slow"})
    # The SDK's own sender awaits each of the task's events: at least one timeout per event.
    assert time.monotonic() - started < timeout
    assert node.push is not None
    await eventually(lambda: node.push.dispatcher.stats.failed >= 1, what="a delivery timed out")
    assert hooks.requests  # it was tried, and given up after the timeout


async def test_a_failing_receiver_is_retried_then_given_up(nodes, http, receiver):
    hooks, hook_url = receiver
    hooks.mode = "fail"  # 503 every time
    url, node = await nodes.start(push={**QUICK, "max_attempts": 3})
    await send(http, url, {"url": f"{hook_url}/hook/x"})
    assert node.push is not None
    await eventually(lambda: node.push.dispatcher.pending == 0, what="all given up")
    events = node.push.dispatcher.stats.failed
    assert events >= 3 and len(hooks.requests) == 3 * events


async def test_a_redirect_is_not_followed(nodes, http, receiver, caplog):
    hooks, hook_url = receiver
    hooks.mode = "redirect"
    url, node = await nodes.start()
    await send(http, url, {"url": f"{hook_url}/hook/first"})
    assert node.push is not None
    await eventually(lambda: node.push.dispatcher.pending == 0, what="all given up")
    assert {r.path for r in hooks.requests} == {"/hook/first"}
    assert node.push.dispatcher.stats.failed == len(hooks.requests)  # one try each
    assert "redirect (not followed)" in caplog.text


# -- the URL guard -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "hook",
    [
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://10.1.2.3/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "ftp://example.org/hook",
    ],
)
async def test_a_non_public_webhook_is_refused_when_configured(nodes, http, hook):
    url, _ = await nodes.start(network={"allow_cidrs": []})
    reply = await rpc(http, url, "SendMessage", send_params({"url": hook}))
    assert reply["error"]["code"] == -32602
    assert "push notification URL refused" in reply["error"]["message"]


async def test_loopback_is_refused_unless_allowed_and_nothing_is_sent(nodes, http, receiver):
    hooks, hook_url = receiver
    url, _ = await nodes.start(network={"allow_cidrs": []})
    reply = await rpc(http, url, "SendMessage", send_params({"url": f"{hook_url}/hook/a"}))
    assert reply["error"]["code"] == -32602
    assert "non-public address" in reply["error"]["message"]
    task = await send(http, url)
    params = {"taskId": task["id"], "url": f"{hook_url}/hook/a"}
    reply = await rpc(http, url, "CreateTaskPushNotificationConfig", params)
    assert reply["error"]["code"] == -32602
    assert hooks.requests == []


async def test_the_guard_checks_again_at_delivery(nodes, http, receiver, caplog):
    """A config that passed once (say, before its name was re-pointed) is refused at delivery."""
    hooks, hook_url = receiver
    url, node = await nodes.start(network={"allow_cidrs": []})
    assert node.push is not None
    reply = await rpc(
        http,
        url,
        "SendMessage",
        {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"skill": "slow", "arguments": {"seconds": 0.5}}}],
            },
            "configuration": {"returnImmediately": True},
        },
    )
    task_id = reply["result"]["task"]["id"]
    stored = TaskPushNotificationConfig(task_id=task_id, id="x", url=f"{hook_url}/hook/a")
    await node.push.configs.set_info(task_id, stored, ServerCallContext())  # as if it passed
    await eventually(lambda: node.push.dispatcher.stats.failed >= 1, what="a refused delivery")
    assert "refused by the URL guard" in caplog.text
    assert hooks.requests == []


# -- configs: CRUD, owners, limits, durability ---------------------------------------------


async def test_configs_are_created_read_listed_and_deleted_on_jsonrpc_and_rest(
    nodes, http, receiver
):
    _, hook_url = receiver
    url, _ = await nodes.start()
    task_id = (await send(http, url))["id"]
    created = await rpc(
        http,
        url,
        "CreateTaskPushNotificationConfig",
        {"taskId": task_id, "id": "one", "url": f"{hook_url}/hook/1", "token": "t1"},
    )
    assert created["result"]["id"] == "one" and created["result"]["taskId"] == task_id
    got = await rpc(http, url, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "one"})
    assert got["result"]["url"] == f"{hook_url}/hook/1"

    rest = f"{url}/rest/tasks/{task_id}/pushNotificationConfigs"
    posted = await http.post(
        rest, json={"id": "two", "url": f"{hook_url}/hook/2"}, headers=A2A_HEADERS
    )
    assert posted.status_code == 200, posted.text
    listed = (await http.get(rest, headers=A2A_HEADERS)).json()
    assert [c["id"] for c in listed["configs"]] == ["one", "two"]
    one = (await http.get(f"{rest}/one", headers=A2A_HEADERS)).json()
    assert one["token"] == "t1"
    assert (await http.delete(f"{rest}/one", headers=A2A_HEADERS)).status_code == 200

    listed = await rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert [c["id"] for c in listed["result"]["configs"]] == ["two"]
    await rpc(http, url, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "two"})
    listed = await rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert listed["result"].get("configs", []) == []


async def test_bad_configs_are_refused_with_the_reason(nodes, http, receiver):
    _, hook_url = receiver
    url, _ = await nodes.start()
    task_id = (await send(http, url))["id"]
    for n in range(10):
        params = {"taskId": task_id, "id": f"c{n}", "url": f"{hook_url}/hook/{n}"}
        assert "result" in await rpc(http, url, "CreateTaskPushNotificationConfig", params)
    params = {"taskId": task_id, "id": "c10", "url": f"{hook_url}/hook/10"}
    reply = await rpc(http, url, "CreateTaskPushNotificationConfig", params)
    assert reply["error"]["code"] == -32602 and "already has 10" in reply["error"]["message"]
    params = {"taskId": task_id, "id": "bad\x00id", "url": f"{hook_url}/hook/z"}
    reply = await rpc(http, url, "CreateTaskPushNotificationConfig", params)
    assert reply["error"]["code"] == -32602 and "control character" in reply["error"]["message"]
    missing = {"taskId": "no-such-task", "url": f"{hook_url}/hook/z"}
    reply = await rpc(http, url, "CreateTaskPushNotificationConfig", missing)
    assert reply["error"]["code"] == -32001


AUTH_ENV = {"ALICE_TOKEN": "alice-token-123", "BOB_TOKEN": "bob-token-4567"}
AUTH = {
    "bearer_tokens": [
        {"secret": "${ALICE_TOKEN}", "principal": "alice"},
        {"secret": "${BOB_TOKEN}", "principal": "bob"},
    ]
}
ALICE = {"Authorization": "Bearer alice-token-123"}
BOB = {"Authorization": "Bearer bob-token-4567"}


async def test_a_principal_never_sees_or_changes_another_principals_configs(nodes, http, receiver):
    hooks, hook_url = receiver
    url, _ = await nodes.start(auth=AUTH, env=AUTH_ENV)
    push = {"id": "mine", "url": f"{hook_url}/hook/alice", "token": "alice-secret"}
    task_id = (await send(http, url, push, **ALICE))["id"]
    mine = {"taskId": task_id, "id": "mine"}

    for method, params in [
        ("GetTaskPushNotificationConfig", mine),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", mine),
        ("CreateTaskPushNotificationConfig", {**mine, "url": f"{hook_url}/hook/bob"}),
    ]:
        reply = await rpc(http, url, method, params, **BOB)
        assert reply["error"]["code"] == -32001, (method, reply)  # task not found
    listed = await rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id}, **ALICE)
    assert [(c["id"], c["token"]) for c in listed["result"]["configs"]] == [
        ("mine", "alice-secret")
    ]
    await eventually(lambda: states(hooks)[-1:] == ["TASK_STATE_COMPLETED"])
    assert {r.path for r in hooks.requests} == {"/hook/alice"}


async def _config_survives_a_restart(nodes: Nodes, http: httpx.AsyncClient, store: str) -> None:
    factory = nodes.factory(store, {}, {})
    async with nodes.apps.serving(factory, name="durable") as url:
        task_id = (await send(http, url))["id"]
        params = {"taskId": task_id, "id": "kept", "url": "http://127.0.0.1:9/hook", "token": "t"}
        assert "result" in await rpc(http, url, "CreateTaskPushNotificationConfig", params)
    async with nodes.apps.serving(factory, name="durable") as url:
        listed = await rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert [(c["id"], c["token"]) for c in listed["result"]["configs"]] == [("kept", "t")]


async def test_configs_survive_a_restart_on_sqlite(nodes, http):
    await _config_survives_a_restart(nodes, http, "sqlite")


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_configs_survive_a_restart_on_postgres(nodes, http):
    table = f"push_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in PG_URL else "?"
    try:
        await _config_survives_a_restart(nodes, http, f"{PG_URL}{separator}table={table}")
    finally:
        conn = await asyncpg.connect(PG_URL)
        try:
            await conn.execute(f"DROP TABLE IF EXISTS {table}_push_configs, {table}")
        finally:
            await conn.close()


async def test_pending_deliveries_are_named_in_the_logs_at_shutdown(nodes, http, caplog):
    sock = free_socket()  # refuses connections for the whole test
    factory = nodes.factory(
        "memory", {}, {"push": {**QUICK, "max_attempts": 20, "shutdown_grace_s": 0.1}}
    )
    async with nodes.apps.serving(factory) as url:
        task_id = (await send(http, url, {"url": f"{url_of(sock)}/hook/never"}))["id"]
    sock.close()
    assert "not delivered at shutdown" in caplog.text
    assert task_id in caplog.text
