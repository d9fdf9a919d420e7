"""A peer tool the directory does not know yet: one bounded refresh, then the call goes through.

A coordinator polls its registry rarely; a peer registers after the coordinator's first poll. A
pipeline step naming the peer's skill must not fail the task (the demo's first attempt did):
the step asks the directory to refresh once and runs. So does a request naming a skill exposed
from a static peer that was down at the last look. Refreshes for missing names are shared by
concurrent callers and started at most once per ``miss_refresh_s``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import TaskState

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.peers.directory import PeerDirectory
from node.peers.settings import PeersSettings, RegistryConnection
from node.peers.toolset import PeerToolset
from node.server.app import build_node_app
from node.tooling.catalog import CombinedCatalog, Toolbox, look_again
from tests.peers.peers_support import (
    PeerFactory,
    Recorder,
    eventually,
    peer_app,
    peer_card,
    registry_app,
)
from tests.peers.test_directory import register
from tests.servers import free_socket, running, url_of

PIPELINE = {
    "id": "add_remote",
    "description": "Add on peer b.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "steps": [{"id": "sum", "tool": "b__add", "arguments": {"a": "$input/a", "b": "$input/b"}}],
}


def coordinator(registry_url: str, *, lean: bool) -> Any:
    return parse_card(
        {
            "id": "coord",
            "name": "Coord",
            "description": "Calls b through a pipeline.",
            "pipelines": [PIPELINE],
            "peers": {"registry": {"url": registry_url, "refresh_s": 3600}},
            "server": {"lean_path": lean},
        },
        env={},
    )


async def start_coordinator(
    serve: Any, tmp_path: Path, *, lean: bool
) -> tuple[str, str, PeerDirectory]:
    """A registry and the coordinator after its first poll (nobody there): URLs, its peers."""
    registry_url = await serve(lambda _: registry_app(str(tmp_path / "r.db")))
    apps: list[Any] = []

    def node(url: str) -> Any:
        apps.append(build_node_app(coordinator(registry_url, lean=lean), public_url=url,
                                   data_dir=tmp_path / "coord", store="memory"))  # fmt: skip
        return apps[-1]

    url = await serve(node)
    peers: PeerDirectory = apps[0].state.node.runtime.peers
    await eventually(lambda: peers.refreshes >= 1)
    return registry_url, url, peers


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
async def test_a_peer_registered_after_the_last_poll_is_found_on_first_use(
    serve: Any,
    http: httpx.AsyncClient,
    start_peer: PeerFactory,
    tmp_path: Path,
    lean: bool,
) -> None:
    registry_url, url, peers = await start_coordinator(serve, tmp_path, lean=lean)
    assert "b__add" not in peers.toolset
    b = await start_peer()
    await register(http, registry_url, b.url)  # after that poll; the next is an hour away
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        task = await client.call("add_remote", {"a": 2, "b": 3})
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        assert artifacts_of(task)["add_remote"] == [{"sum": 5}]
        assert (peers.refreshes, peers.miss_refreshes) == (2, 1)
        again = await client.call("add_remote", {"a": 1, "b": 1})  # known now: no refresh
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        assert (peers.refreshes, peers.miss_refreshes) == (2, 1)


async def test_a_peer_that_stays_missing_fails_the_step_after_one_refresh(
    serve: Any, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    _, url, peers = await start_coordinator(serve, tmp_path, lean=True)
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        tasks = await asyncio.gather(
            *(client.call("add_remote", {"a": 1, "b": 2}) for _ in range(5))
        )
    for task in tasks:
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert "peer tool 'b__add' is not available" in status_text(task)
    assert peers.miss_refreshes == 1  # five misses at once, one refresh (and within the second)
    assert peers.refreshes == 2


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
async def test_an_exposed_skill_of_a_peer_down_at_the_last_refresh_is_found_when_named(
    serve: Any, http: httpx.AsyncClient, tmp_path: Path, lean: bool
) -> None:
    """A request naming ``b__add`` (exposed from a static peer that refused connections when
    the node last looked, an hour before its next look) refreshes once and runs."""
    sock = free_socket()  # bound, not listening: the peer's port refuses connections
    peer_url = url_of(sock)
    card = parse_card(
        {
            "id": "coord",
            "name": "Coord",
            "description": "Exposes peer b's skills.",
            "peers": {"static": [{"url": peer_url, "expose": True}], "refresh_s": 3600},
            "server": {"lean_path": lean},
        },
        env={},
    )
    apps: list[Any] = []

    def node(url: str) -> Any:
        apps.append(build_node_app(card, public_url=url, data_dir=tmp_path / "coord",
                                   store="memory"))  # fmt: skip
        return apps[-1]

    url = await serve(node)
    peers: PeerDirectory = apps[0].state.node.runtime.peers
    await eventually(lambda: peers.refreshes >= 1)
    async with NodeClient.connect(url, streaming=False, http=http) as client:
        missing = await client.call("b__add", {"a": 1, "b": 1})
        assert missing.status.state == TaskState.TASK_STATE_REJECTED
        assert "unknown skill 'b__add'" in status_text(missing)
        assert peers.miss_refreshes == 1  # looked once, b still down
        async with running(peer_app(peer_card(peer_url), Recorder()), sock):
            deadline = time.monotonic() + 10  # a miss refreshes at most once a second
            task = await client.call("b__add", {"a": 2, "b": 3})
            while task.status.state == TaskState.TASK_STATE_REJECTED:
                assert time.monotonic() < deadline, status_text(task)
                await asyncio.sleep(0.05)
                task = await client.call("b__add", {"a": 2, "b": 3})
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
            assert artifacts_of(task)["b__add"] == [{"sum": 5}]
            assert peers.miss_refreshes == 2  # one more look, which found b
            again = await client.call("b__add", {"a": 1, "b": 1})  # known now: no refresh
            assert again.status.state == TaskState.TASK_STATE_COMPLETED
            assert peers.miss_refreshes == 2


async def test_misses_share_one_refresh_and_start_one_per_interval(
    http: httpx.AsyncClient, start_peer: PeerFactory, tmp_path: Path, serve: Any
) -> None:
    registry_url = await serve(lambda _: registry_app(str(tmp_path / "r.db")))
    now = [100.0]
    tools = PeerToolset()
    settings = PeersSettings(registry=RegistryConnection(url=registry_url))
    peers = PeerDirectory(
        http, settings, self_id="a", toolset=tools, clock=lambda: now[0], miss_refresh_s=1.0
    )
    catalog = CombinedCatalog(Toolbox(), CombinedCatalog(PeerToolset(), tools))
    try:
        found = await asyncio.gather(*(look_again(catalog, "b__add") for _ in range(20)))
        assert found == [False] * 20
        assert (peers.miss_refreshes, peers.refreshes) == (1, 1)
        b = await start_peer()
        await register(http, registry_url, b.url)
        now[0] += 0.5  # within the interval: no new refresh, the miss stands
        assert not await look_again(catalog, "b__add")
        assert (peers.miss_refreshes, peers.refreshes) == (1, 1)
        now[0] += 0.6
        assert await look_again(catalog, "b__add")
        assert (peers.miss_refreshes, peers.refreshes) == (2, 2)
        assert await look_again(catalog, "b__add")  # present: nothing asked
        assert (peers.miss_refreshes, peers.refreshes) == (2, 2)
    finally:
        await peers.aclose()
    assert tools.reload is None  # a closed directory is never asked again
    assert not await look_again(catalog, "b__fail")
