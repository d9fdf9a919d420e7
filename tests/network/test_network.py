"""A real network: a registry, a demo site and the coordinator, web, text and data nodes, each its
own process on a free loopback port, shared by the tests of this module.

Cards are those of ``cards/`` with test additions: a fast registry link (heartbeat 0.4 s, refresh
0.3 s, TTL 2 s), static peers between the coordinator and the data node, a slow ``sleep`` command
tool on the data node, and pipelines that call across (``ping`` ↔ ``pong`` loop, ``slow``).
Tests that break something (SIGSTOP, a killed registry or node) put it back before they end.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import ParseDict
from netsupport import (
    TOKEN_ENV,
    Processes,
    agents,
    answers,
    card,
    children_of,
    free_ports,
    wait_for,
)

from node.cli import main
from node.client import NodeClient, apply_event, artifacts_of, skill_message, status_text
from node.network.children import Child
from node.protocol import HOP

pytestmark = [pytest.mark.network, pytest.mark.asyncio(loop_scope="module")]

IDS = {"coordinator", "web", "text", "data"}
SLEEP_TOOL = {
    "name": "sleep",
    "description": "Sleep for some seconds (a slow skill for tests).",
    "parameters": {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 120}},
        "required": ["seconds"],
    },
    "command": ["sleep", "{seconds}"],
    "read_only": True,
    "timeout": 120,
}
PING = {  # coordinator → data.pong
    "id": "ping",
    "description": "Ask the data node to pong.",
    "steps": [{"id": "pong", "tool": "data__pong"}],
}
PONG = {  # data → coordinator.ping: a loop
    "id": "pong",
    "description": "Ask the coordinator to ping.",
    "steps": [{"id": "ping", "tool": "coordinator__ping"}],
}
SLOW = {  # coordinator → data.sleep
    "id": "slow",
    "description": "Sleep on the data node.",
    "input_schema": {
        "type": "object",
        "properties": {"seconds": {"type": "number"}},
        "required": ["seconds"],
    },
    "steps": [{"id": "sleep", "tool": "data__sleep", "arguments": {"seconds": "$input/seconds"}}],
}


@dataclass
class Net:
    procs: Processes
    registry: str
    site: str
    urls: dict[str, str]
    children: dict[str, Child]


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def net(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Net]:
    tmp = tmp_path_factory.mktemp("net")
    reg_port, site_port, *ports = free_ports(6)
    urls = {
        name: _url(p) for name, p in zip(["coordinator", "web", "text", "data"], ports, strict=True)
    }
    registry = _url(reg_port)
    link = {"url": registry, "token_env": TOKEN_ENV, "heartbeat_s": 0.4, "refresh_s": 0.3}
    coordinator = card("coordinator", peers={"registry": link, "static": [{"url": urls["data"]}]})
    coordinator["pipelines"] = [*coordinator.get("pipelines", []), PING, SLOW]
    cards = {
        "coordinator": coordinator,
        "web": card("web", network={"allow_cidrs": ["127.0.0.0/8"]}, peers={"registry": link}),
        "text": card("text", peers={"registry": link}),
        "data": card(
            "data",
            declared_tools=[SLEEP_TOOL],
            pipelines=[PONG],
            peers={"registry": link, "static": [{"url": urls["coordinator"]}]},
        ),
    }
    procs = Processes(tmp)
    try:
        site_dir = Path(__file__).resolve().parents[2] / "deploy" / "site"
        site_argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(site_port)]
        site = await procs.start("site", [*site_argv, "--directory", str(site_dir)])
        reg = await procs.registry(reg_port, ttl=2.0)
        await procs.ready(reg, registry + "/healthz")
        children = {"registry": reg, "site": site}
        for name, data in cards.items():
            children[name] = await procs.node(data, int(urls[name].rsplit(":", 1)[1]))
        await procs.ready(site, _url(site_port) + "/")
        for name in cards:
            await procs.ready(children[name], urls[name] + "/readyz")

        async def all_registered() -> bool:
            return set(await agents(registry, healthy="true")) == IDS

        await wait_for(all_registered, what="every node registered")
        yield Net(procs, registry, _url(site_port), urls, children)
    finally:
        await procs.close()


async def send(url: str, skill: str, arguments: dict[str, Any], **metadata: Any) -> Task:
    """Send one structured request with the official client and return the final task."""
    async with NodeClient.connect(url, timeout=60.0) as node:
        return await node.send(skill_message(skill, arguments, metadata=metadata or None))


async def send_when_discovered(url: str, skill: str, arguments: dict[str, Any]) -> Task:
    """Retry while the caller has not yet discovered the peer a step needs (polled, bounded)."""

    async def attempt() -> Task | None:
        task = await send(url, skill, arguments)
        return None if "not available" in status_text(task) else task

    return await wait_for(attempt, timeout=15.0, what=f"{skill} to find its peers")


def state(task: Task) -> str:
    return TaskState.Name(task.status.state)


# -- registration and search -----------------------------------------------------------------


async def test_every_node_registers_and_is_found_by_skill_tag_and_text(
    net: Net, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = await agents(net.registry, healthy="true")
    assert set(listed) == IDS
    for name, url in net.urls.items():
        assert listed[name]["card_url"] == f"{url}/.well-known/agent-card.json"
    assert set(await agents(net.registry, skill="keywords")) == {"text"}
    assert set(await agents(net.registry, tag="math")) == {"coordinator", "data"}
    assert set(await agents(net.registry, q="web pages")) == {"web"}

    # the command runs its own event loop: in a thread, as from a shell
    assert await asyncio.to_thread(main, ["agents", net.registry, "--skill", "calculate"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["ID", "NAME", "URL", "SKILLS", "HEALTHY"]
    assert "data" in out and net.urls["data"] in out and "coordinator" not in out


# -- a pipeline across three nodes -----------------------------------------------------------


async def test_page_report_pipeline_crosses_coordinator_web_and_text(net: Net) -> None:
    # the pipeline's steps need both peers (web and text): wait until the coordinator has both
    page = {"url": net.site + "/", "top": 5}
    await send_when_discovered(net.urls["coordinator"], "page_report", page)
    async with httpx.AsyncClient(timeout=30.0) as http:
        config = ClientConfig(streaming=True, httpx_client=http)
        card_json = (
            await http.get(net.urls["coordinator"] + "/.well-known/agent-card.json")
        ).json()
        agent_card = ParseDict(card_json, AgentCard(), ignore_unknown_fields=True)
        client = ClientFactory(config).create(agent_card)
        message = skill_message("page_report", page)
        task = Task()
        async for event in client.send_message(SendMessageRequest(message=message)):
            task = apply_event(task, event)
        await client.close()
    assert state(task) == "TASK_STATE_COMPLETED", status_text(task)
    (report,) = artifacts_of(task)["page_report"]
    assert report["stats"]["words"] > 50  # text_stats ran on the text node
    assert {k["term"] for k in report["keywords"]} & {"agent", "agents", "node", "nodes"}


# -- hop guard: loops, long chains, deadlines ------------------------------------------------


async def test_a_loop_between_two_nodes_is_refused_naming_the_chain(net: Net) -> None:
    async def both_ways() -> Task | None:
        task = await send(net.urls["coordinator"], "ping", {})
        return task if "not available" not in status_text(task) else None

    task = await wait_for(both_ways, what="ping and pong peers discovered")
    assert state(task) == "TASK_STATE_FAILED"
    assert "loop: coordinator → data → coordinator" in status_text(task)


async def test_an_over_long_chain_is_refused_naming_the_chain(net: Net) -> None:
    hop = {"chain": ["edge", "relay"], "max_hops": 3}
    await send_when_discovered(net.urls["coordinator"], "compute", {"expression": "1"})
    task = await send(net.urls["coordinator"], "ping", {}, **{HOP: hop})
    assert state(task) == "TASK_STATE_FAILED"
    assert "hop limit 3 reached: edge → relay → coordinator → data" in status_text(task)

    full = {"chain": ["a", "b", "c"], "max_hops": 3}
    task = await send(net.urls["data"], "calculate", {"expression": "1"}, **{HOP: full})
    assert state(task) == "TASK_STATE_REJECTED"
    assert "hop limit 3 reached: a → b → c → data" in status_text(task)


def _sleeps(child: Child) -> dict[int, str]:
    assert child.pid is not None
    return {pid: name for pid, name in children_of(child.pid).items() if name == "sleep"}


async def test_a_deadline_is_honoured_across_hops(net: Net) -> None:
    await send_when_discovered(net.urls["coordinator"], "compute", {"expression": "1"})
    data = net.children["data"]
    started = time.monotonic()
    hop = {"chain": ["caller"], "max_hops": 4, "deadline": time.time() + 2.0}
    task = await send(net.urls["coordinator"], "slow", {"seconds": 60}, **{HOP: hop})
    elapsed = time.monotonic() - started
    assert state(task) == "TASK_STATE_FAILED"
    # whichever side notices first reports it: the coordinator's own deadline, or the peer's
    assert "timed out" in status_text(task) or "data" in status_text(task)
    assert elapsed < 8.0  # the 2 s deadline, not the 60 s sleep nor the 30 s call timeout

    async def sleep_stopped() -> bool:  # the data node cancelled its task: no sleep left
        return not _sleeps(data)

    await wait_for(sleep_stopped, timeout=10.0, what="the data node to cancel the sleep")


# -- health ----------------------------------------------------------------------------------


async def test_a_node_that_stops_heartbeating_leaves_healthy_results(net: Net) -> None:
    text = net.children["text"]
    text.signal(signal.SIGSTOP)
    try:

        async def gone() -> bool:
            return "text" not in await agents(net.registry, healthy="true")

        await wait_for(gone, timeout=10.0, what="text to turn unhealthy")
        assert set(await agents(net.registry, healthy="true")) == IDS - {"text"}
    finally:
        text.signal(signal.SIGCONT)

    async def back() -> bool:
        return "text" in await agents(net.registry, healthy="true")

    await wait_for(back, timeout=10.0, what="text to heartbeat again")


# -- registry down and back ------------------------------------------------------------------


async def test_nodes_outlive_the_registry_and_it_recovers_from_its_database(net: Net) -> None:
    coordinator = net.urls["coordinator"]
    report = {"url": net.site + "/", "top": 3}
    await send_when_discovered(coordinator, "page_report", report)
    registry = net.children["registry"]
    registry.signal(signal.SIGKILL)
    await registry.wait()
    try:
        # nodes keep serving, and forward to the web and text nodes they learnt from the registry
        assert await answers(coordinator + "/healthz")
        task = await send(coordinator, "page_report", report)
        assert state(task) == "TASK_STATE_COMPLETED", status_text(task)
    finally:
        restarted_at = time.time()
        await registry.start()  # the same database file
        await net.procs.ready(registry, net.registry + "/healthz")

    assert set(await agents(net.registry)) == IDS  # recovered from the database

    async def heartbeats_again() -> bool:
        listed = await agents(net.registry, healthy="true")
        return set(listed) == IDS and all(
            _epoch(a["last_heartbeat"]) > restarted_at for a in listed.values()
        )

    await wait_for(heartbeats_again, timeout=15.0, what="every node to heartbeat the new registry")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# -- a peer killed mid-call (last: it restarts the data node) ----------------------------------


async def test_a_peer_killed_mid_call_fails_the_callers_task_naming_it(net: Net) -> None:
    await send_when_discovered(net.urls["coordinator"], "compute", {"expression": "1"})
    data = net.children["data"]
    hop = {"chain": ["caller"], "max_hops": 4, "deadline": time.time() + 20.0}
    call = asyncio.create_task(send(net.urls["coordinator"], "slow", {"seconds": 60}, **{HOP: hop}))
    try:

        async def sleeping() -> dict[int, str]:
            return _sleeps(data)

        await wait_for(sleeping, what="the slow call to reach the data node")
        started = time.monotonic()
        data.signal(signal.SIGKILL)
        task = await asyncio.wait_for(call, timeout=20.0)
        assert time.monotonic() - started < 15.0  # well within the 20 s deadline
        assert state(task) == "TASK_STATE_FAILED"
        assert "peer data" in status_text(task)
    finally:
        if not call.done():
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
        await data.wait()
        await data.start()
        await net.procs.ready(data, net.urls["data"] + "/readyz")
