"""A node calls a REAL a2a-sdk 0.3 server (its own venv, ``legacy_server``) as a peer tool.

The 0.3 card (``url``, ``preferredTransport``, ``additionalInterfaces``) is read through the SDK's
0.3 compat model; the call goes out on the SDK's 0.3 compat transports (JSON-RPC
``message/send`` or REST ``/v1/message:send``), blocking or streamed; the answer is a Task with an
artifact or a direct Message; the skill is chosen with ``metadata.skill``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState

from node.card import parse_card
from node.client import NodeClient, artifacts_of, status_text
from node.errors import PeerError
from node.peers.cards import CardFetcher
from node.peers.peer_client import PeerClient
from node.peers.remote_tool import DEFAULT_PARAMETERS, RemoteSkillTool
from node.server.app import build_node_app
from node.tooling.context import ToolContext
from tests.interop.conftest import LegacyServer
from tests.peers.peers_support import eventually
from tests.servers import InProcessApps


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10.0) as client:
        yield client


async def legacy_tool(
    http: httpx.AsyncClient,
    url: str,
    skill_id: str,
    *,
    streaming: bool = False,
    token: str | None = None,
) -> RemoteSkillTool:
    card = await CardFetcher(http).fetch(url)
    client = PeerClient("legacy", card, http=http, streaming=streaming, token=lambda: token)
    skill = next(s for s in card.skills if s.id == skill_id)
    return RemoteSkillTool(client, skill, self_id="a", call_timeout_s=10.0)


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("preferred", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("reply", ["task", "message"])
async def test_a_node_calls_a_real_0_3_server_as_a_peer_tool(
    legacy_server: LegacyServer,
    http: httpx.AsyncClient,
    reply: str,
    preferred: str,
    streaming: bool,
) -> None:
    url = legacy_server(reply=reply, preferred=preferred, streaming=streaming)
    echo = await legacy_tool(http, url, "echo", streaming=streaming)
    shout = await legacy_tool(http, url, "shout", streaming=streaming)
    assert echo.parameters == DEFAULT_PARAMETERS
    first = echo.peer.card.supported_interfaces[0]
    assert (first.protocol_binding, first.protocol_version) == (preferred, "0.3.0")
    ctx = ToolContext()
    assert await echo.execute({"text": "hi"}, ctx) == "echo: hi"
    assert await shout.execute({"text": "hi"}, ctx) == "HI"
    with_data = await echo.execute({"text": "hi", "data": {"n": 1}}, ctx)
    assert with_data == {"received": [{"n": 1}]}


async def test_our_token_reaches_a_0_3_server_and_a_wrong_one_is_refused(
    legacy_server: LegacyServer, http: httpx.AsyncClient
) -> None:
    url = legacy_server(bearer="s3cret", preferred="HTTP+JSON")
    good = await legacy_tool(http, url, "echo", token="s3cret")
    assert await good.execute({"text": "hi"}, ToolContext()) == "echo: hi"
    bad = await legacy_tool(http, url, "echo", token="wrong")
    with pytest.raises(PeerError, match="refused the call"):
        await bad.execute({"text": "hi"}, ToolContext())
    assert bad.peer.breaker.state == "closed"  # it answered: reachable


async def test_a_client_completes_a_task_on_a_node_whose_peer_is_a_0_3_server(
    legacy_server: LegacyServer, apps: InProcessApps, tmp_path: Path
) -> None:
    url = legacy_server(reply="message")
    card = parse_card(
        {
            "id": "hub",
            "name": "Hub",
            "description": "Publishes a 0.3 agent's skills as its own.",
            "peers": {"static": [{"url": url, "expose": True}], "refresh_s": 60},
        },
        env={},
    )
    hub = await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "hub", store="memory")
    )
    async with apps.client() as client_http:

        async def published() -> bool:
            served = (await client_http.get(f"{hub}/.well-known/agent-card.json")).json()
            return "legacy-echo__shout" in {s["id"] for s in served["skills"]}

        await eventually(published, within=10.0)
        async with NodeClient.connect(hub, streaming=False, http=client_http) as client:
            task = await client.call("legacy-echo__shout", {"text": "quiet please"})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    assert artifacts_of(task) == {"legacy-echo__shout": ["QUIET PLEASE"]}
