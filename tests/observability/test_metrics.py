"""GET /metrics on nodes and on the registry: real apps, real tasks, the scrape parsed as Prometheus
text by ``prometheus_client``'s own parser."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from node.card import parse_card
from node.observability.metrics import MAX_LABEL_VALUES, OTHER, NodeMetrics, _Bounded
from node.peers.settings import StaticPeer
from node.server.app import build_node_app
from node.tooling import ToolContext, ToolRunner, tool
from node.tooling.catalog import Toolbox
from tests.server.push_receiver import Receiver, eventually
from tests.servers import InProcessApps, free_socket, running

A2A = {"A2A-Version": "1.0"}
AUTH_ENV = {"SCRAPER_TOKEN": "scraper-token-123"}


@tool(read_only=True)
def boom(text: str) -> str:
    """Always fails: a tool error.

    Args:
        text: Ignored.
    """
    raise RuntimeError("the tool broke")


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of a scrape, by (name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def label_values(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(k)[label] for (n, k) in samples if n == name and label in dict(k)}


async def scrape(http: httpx.AsyncClient, url: str, **headers: str) -> Samples:
    response = await http.get(f"{url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


def node_card(**overrides: Any) -> Any:
    data: dict[str, Any] = {
        "id": "metered",
        "name": "Metered",
        "description": "A node whose metrics are read.",
        "tools": ["calculate"],
    }
    data.update(overrides)
    return parse_card(data, env=AUTH_ENV)


async def start(apps: InProcessApps, tmp_path: Path, **overrides: Any) -> str:
    card = node_card(**overrides)
    return await apps.start(
        lambda url: build_node_app(
            card, public_url=url, data_dir=tmp_path / uuid.uuid4().hex[:6], store="memory",
            tools=[boom],
        )
    )  # fmt: skip


async def send(
    http: httpx.AsyncClient, url: str, skill: str, arguments: Any, **headers: str
) -> str:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": skill, "arguments": arguments}}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = (await http.post(f"{url}/", json=body, headers={**A2A, **headers})).json()
    state: str = reply["result"]["task"]["status"]["state"]
    return state


@pytest.mark.parametrize("lean", [True, False], ids=["lean-path", "sdk-path"])
async def test_tasks_and_tool_calls_are_counted_by_skill_state_and_outcome(apps, tmp_path, lean):
    url = await start(apps, tmp_path, server={"lean_path": lean})
    async with apps.client() as http:
        assert await send(http, url, "calculate", {"expression": "2+3"}) == "TASK_STATE_COMPLETED"
        assert await send(http, url, "calculate", {"expression": "2+"}) == "TASK_STATE_FAILED"
        assert await send(http, url, "calculate", {"expression": ["x"]}) == "TASK_STATE_REJECTED"
        assert await send(http, url, "calculate", {}) == "TASK_STATE_INPUT_REQUIRED"
        assert await send(http, url, "boom", {"text": "x"}) == "TASK_STATE_FAILED"
        assert await send(http, url, "no_such_skill", {}) == "TASK_STATE_REJECTED"
        samples = await scrape(http, url)

    tasks = "a2a_node_tasks_total"
    assert value(samples, tasks, skill="calculate", state="completed") == 1
    assert value(samples, tasks, skill="calculate", state="failed") == 1
    assert value(samples, tasks, skill="calculate", state="rejected") == 1
    assert value(samples, tasks, skill="calculate", state="input_required") == 1
    assert value(samples, tasks, skill="boom", state="failed") == 1
    assert value(samples, tasks, skill=OTHER, state="rejected") == 1  # the unknown skill
    assert value(samples, "a2a_node_task_duration_seconds_count", skill="calculate") == 4
    assert value(samples, "a2a_node_tasks_in_flight") == 0

    calls = "a2a_node_tool_calls_total"
    assert value(samples, calls, tool="calculate", outcome="ok") == 1
    # "2+" is the tool's own invalid-arguments result; ["x"] fails the schema before it runs
    # (counted once, though the lean path tried it before the SDK path)
    assert value(samples, calls, tool="calculate", outcome="invalid_arguments") == 2
    assert value(samples, calls, tool="boom", outcome="error") == 1
    assert label_values(samples, calls, "tool") == {"calculate", "boom"}  # no skill: no call
    assert value(samples, "a2a_node_tool_call_duration_seconds_count", tool="calculate") == 3


async def test_each_app_counts_apart_and_a_card_setting_turns_metrics_off(apps, tmp_path):
    first, second = await start(apps, tmp_path), await start(apps, tmp_path)
    off = await start(apps, tmp_path, server={"metrics": False})
    async with apps.client() as http:
        await send(http, first, "calculate", {"expression": "1"})
        await send(http, first, "calculate", {"expression": "1"})
        await send(http, second, "calculate", {"expression": "1"})
        tasks = "a2a_node_tasks_total"
        completed = {"skill": "calculate", "state": "completed"}
        assert value(await scrape(http, first), tasks, **completed) == 2
        assert value(await scrape(http, second), tasks, **completed) == 1
        assert (await http.get(f"{off}/metrics")).status_code == 404


async def test_label_values_are_bounded(apps, tmp_path):
    url = await start(apps, tmp_path)
    async with apps.client() as http:
        for _ in range(5):  # skill names no node has: free text and ids never become labels
            await send(http, url, f"task-{uuid.uuid4().hex}", {})
        samples = await scrape(http, url)
    assert label_values(samples, "a2a_node_tasks_total", "skill") == {OTHER}
    assert value(samples, "a2a_node_tasks_total", skill=OTHER, state="rejected") == 5

    # a tool name a model made up reaches the runner: counted as "other"
    metrics = NodeMetrics(is_skill=lambda _: False, is_tool=Toolbox([boom]).__contains__)
    runner = ToolRunner(Toolbox([boom]))
    for name in ("made_up_1", "made_up_2", "boom"):
        await runner.run_one(name, {"text": "x"}, ToolContext(metrics=metrics))
    samples = parse(metrics.exposition().decode())
    assert value(samples, "a2a_node_tool_calls_total", tool=OTHER, outcome="error") == 2
    assert value(samples, "a2a_node_tool_calls_total", tool="boom", outcome="error") == 1

    label = _Bounded(lambda name: name.startswith("known"), cap=3)
    assert [label(n) for n in ("known1", "x", "known2", "known3", "known4", "known1", 7)] == [
        "known1", OTHER, "known2", "known3", OTHER, "known1", OTHER,
    ]  # fmt: skip
    assert MAX_LABEL_VALUES <= 1000


async def test_metrics_need_credentials_when_the_node_has_auth(apps, tmp_path):
    auth = {"bearer_tokens": [{"secret": "${SCRAPER_TOKEN}", "principal": "prometheus"}]}
    url = await start(apps, tmp_path, auth=auth)
    async with apps.client() as http:
        refused = await http.get(f"{url}/metrics")
        assert refused.status_code == 401
        assert "a2a_node" not in refused.text
        wrong = await http.get(f"{url}/metrics", headers={"Authorization": "Bearer wrong-token"})
        assert wrong.status_code == 401
        samples = await scrape(http, url, Authorization="Bearer scraper-token-123")
        assert value(samples, "a2a_node_tasks_in_flight") == 0
        assert (await http.get(f"{url}/healthz")).status_code == 200  # still public


async def test_peer_calls_and_circuit_state_through_a_second_node(serve, tmp_path):
    data_card = node_card(id="data", name="Data")
    data = await serve(
        lambda url: build_node_app(
            data_card, public_url=url, data_dir=tmp_path / "data", store="memory"
        )
    )
    caller_card = node_card(
        id="caller", peers={"static": [StaticPeer(url=data, expose=True).model_dump()]}
    )
    caller = await serve(
        lambda url: build_node_app(
            caller_card, public_url=url, data_dir=tmp_path / "caller", store="memory"
        )
    )
    async with httpx.AsyncClient(timeout=15) as http:
        ok = await send(http, caller, "data__calculate", {"expression": "6*7"})
        assert ok == "TASK_STATE_COMPLETED"
        failed = await send(http, caller, "data__calculate", {"expression": "6*"})
        assert failed == "TASK_STATE_FAILED"
        samples = await scrape(http, caller)
        data_samples = await scrape(http, data)

    assert value(samples, "a2a_node_peer_calls_total", peer="data", outcome="ok") == 1
    assert value(samples, "a2a_node_peer_calls_total", peer="data", outcome="error") == 1
    assert value(samples, "a2a_node_peer_call_duration_seconds_count", peer="data") == 2
    assert value(samples, "a2a_node_peer_circuit_state", peer="data") == 0  # closed
    tool_calls = "a2a_node_tool_calls_total"
    assert value(samples, tool_calls, tool="data__calculate", outcome="ok") == 1
    tasks = "a2a_node_tasks_total"
    assert value(samples, tasks, skill="data__calculate", state="completed") == 1
    # the data node counted the forwarded tasks itself (a failed peer task, a completed one)
    assert value(data_samples, tasks, skill="calculate", state="completed") == 1
    assert value(data_samples, tasks, skill="calculate", state="failed") == 1
    assert not label_values(data_samples, "a2a_node_peer_calls_total", "peer")


async def until_counted(http: httpx.AsyncClient, url: str, outcome: str, at_least: float) -> None:
    """Poll the node's push delivery count for ``outcome`` until it reaches ``at_least``."""
    deadline = time.monotonic() + 15
    while True:
        samples = await scrape(http, url)
        if value(samples, "a2a_node_push_deliveries_total", outcome=outcome) >= at_least:
            return
        assert time.monotonic() < deadline, f"push deliveries {outcome} < {at_least}"
        await asyncio.sleep(0.02)


async def test_push_deliveries_are_counted_by_outcome(apps, tmp_path):
    hooks = Receiver()
    card = node_card(
        network={"allow_cidrs": ["127.0.0.0/8"]},
        push={"backoff_s": 0.05, "max_backoff_s": 0.1, "max_attempts": 2},
    )
    async with running(hooks.app(), free_socket()) as hook_url:
        url = await apps.start(
            lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "p", store="memory")
        )
        async with apps.client() as http:

            async def send_with_push(path: str) -> None:
                message = {
                    "messageId": uuid.uuid4().hex,
                    "role": "ROLE_USER",
                    "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "1"}}}],
                }
                config = {"url": f"{hook_url}/hook/{path}"}
                params = {
                    "message": message,
                    "configuration": {"taskPushNotificationConfig": config},
                }
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
                reply = (await http.post(f"{url}/", json=body, headers=A2A)).json()
                assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

            await send_with_push("ok")
            await eventually(lambda: len(hooks.requests) >= 3, what="three events delivered")
            await until_counted(http, url, "delivered", 3)
            hooks.mode = "redirect"  # refused: never retried
            await send_with_push("moved")
            await until_counted(http, url, "refused", 1)
            hooks.mode = "fail"  # 503: retried, then failed after max_attempts
            await send_with_push("down")
            await until_counted(http, url, "failed", 1)
            await until_counted(http, url, "retried", 1)
        hooks.release()


async def registry_settings(tmp_path: Path, **overrides: Any) -> Any:
    from node.registry import RegistrySettings

    return RegistrySettings(
        db=str(tmp_path / f"{uuid.uuid4().hex[:6]}.db"), allow_cidrs=("127.0.0.0/8",), ttl_s=30,
        **overrides,
    )  # fmt: skip


async def test_registry_agents_by_health_heartbeats_and_registrations(tmp_path):
    from node.registry import build_registry_app
    from tests.registry.conftest import CardServer, FakeClock, in_process

    cards = CardServer()
    async with running(cards.app(), free_socket(), lifespan="off") as base:
        cards.base_url = base
        clock = FakeClock()
        app = build_registry_app(await registry_settings(tmp_path), clock=clock)
        async with in_process(app) as client:
            for name in ("Alpha", "Beta"):
                url = cards.put_card(f"/{name}.json", name)
                assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 201
            again = await client.post("/v1/agents", json={"card_url": f"{base}/Alpha.json"})
            assert again.status_code == 200
            missing = await client.post("/v1/agents", json={"card_url": f"{base}/none.json"})
            assert missing.status_code >= 400
            urls = [f"{base}/Alpha.json", f"{base}/none.json", cards.put_card("/G.json", "Gamma")]
            imported = await client.post("/v1/agents:import", json={"card_urls": urls})
            assert imported.json()["registered"] == 1, imported.text  # unchanged, error, registered
            assert (await client.delete("/v1/agents/gamma")).status_code == 204
            clock.advance(20)
            assert (await client.put("/v1/agents/alpha/heartbeat")).status_code == 200
            clock.advance(20)  # beta: 40 s since it was seen (ttl 30): unhealthy, not evicted
            samples = await scrape(client, "")

    assert value(samples, "a2a_registry_agents", health="healthy") == 1
    assert value(samples, "a2a_registry_agents", health="unhealthy") == 1
    assert value(samples, "a2a_registry_heartbeats_total") == 1
    registrations = "a2a_registry_registrations_total"
    assert value(samples, registrations, outcome="created") == 3
    assert value(samples, registrations, outcome="updated") == 2
    assert value(samples, registrations, outcome="refused") == 2


async def test_registry_metrics_follow_the_read_token_and_can_be_turned_off(tmp_path):
    from pydantic import SecretStr

    from node.registry import build_registry_app
    from tests.registry.conftest import in_process

    settings = await registry_settings(
        tmp_path, token=SecretStr("write-token"), read_token_required=True
    )
    async with in_process(build_registry_app(settings)) as client:
        assert (await client.get("/metrics")).status_code == 401
        samples = await scrape(client, "", Authorization="Bearer write-token")
        assert value(samples, "a2a_registry_agents", health="healthy") == 0
        assert ("a2a_registry_agents", frozenset({("health", "healthy")})) in samples
    async with in_process(
        build_registry_app(await registry_settings(tmp_path, metrics=False))
    ) as client:
        assert (await client.get("/metrics")).status_code == 404


def test_histograms_count_each_observation_in_the_buckets_prometheus_expects():
    metrics = NodeMetrics(is_skill=lambda _: False, is_tool=lambda name: name == "t")
    for seconds in (0.001, 0.0011, 0.3, 100.0):
        metrics.tool_call("t", None, seconds)
    samples = parse(metrics.exposition().decode())
    bucket = "a2a_node_tool_call_duration_seconds_bucket"
    assert value(samples, bucket, tool="t", le="0.001") == 1  # "le": a bound holds its value
    assert value(samples, bucket, tool="t", le="0.0025") == 2  # cumulative
    assert value(samples, bucket, tool="t", le="0.5") == 3
    assert value(samples, bucket, tool="t", le="60.0") == 3
    assert value(samples, bucket, tool="t", le="+Inf") == 4
    assert value(samples, "a2a_node_tool_call_duration_seconds_count", tool="t") == 4
    assert value(samples, "a2a_node_tool_call_duration_seconds_sum", tool="t") == pytest.approx(
        100.3021
    )
    assert value(samples, "a2a_node_tool_calls_total", tool="t", outcome="ok") == 4
