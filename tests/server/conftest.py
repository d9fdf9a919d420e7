"""A node built from a card written in the test, with test tools, in-process with its lifespan.

``start_node`` returns the node's URL (``http://<id>-<n>.test``) and the ``http`` client reaches it
through ``httpx.ASGITransport``; pass that client on (``make_client(http, url)``,
``NodeClient.connect(url, http=http)``). Tests that need a socket use ``serve`` instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory

from node.card import parse_card
from node.server.app import build_node_app
from node.tooling import ToolContext, tool
from tests.servers import InProcessApps

A2A_HEADERS = {"A2A-Version": "1.0"}


@tool(read_only=True)
async def slow(seconds: float, ctx: ToolContext) -> str:
    """Wait, then answer; a stand-in for long work that must be cancellable.

    Args:
        seconds: How long to wait.
    """
    await asyncio.sleep(seconds)
    return f"waited {seconds}s"


@tool(read_only=True, scope="internal")
def secret_helper() -> str:
    """An internal tool: never callable by remote callers."""
    return "internal"


@tool(read_only=True, requires=("admin",))
def admin_only() -> str:
    """A tool that needs the admin capability."""
    return "admin ok"


TEST_TOOLS = [slow, secret_helper, admin_only]


def card_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "test-node",
        "name": "Test Node",
        "description": "A node under test.",
        "tools": ["calculate", "text_stats", "json_query"],
    }
    data.update(overrides)
    return data


NodeFactory = Callable[..., Any]


@pytest.fixture
async def start_node(apps: InProcessApps, tmp_path: Path) -> NodeFactory:
    """``url = await start_node(store="sqlite", **card_overrides)``: a node in-process."""

    async def start(
        store: str = "sqlite", env: dict[str, str] | None = None, **overrides: Any
    ) -> str:
        card = parse_card(card_data(**overrides), env=env or {})
        return await apps.start(
            lambda public_url: build_node_app(
                card,
                public_url=public_url,
                data_dir=tmp_path / card.id,
                store=store,
                tools=TEST_TOOLS,
            ),
            name=card.id,
        )

    return start


@pytest.fixture
async def node_url(start_node: NodeFactory) -> str:
    url: str = await start_node()
    return url


@pytest.fixture
async def http(apps: InProcessApps) -> AsyncIterator[httpx.AsyncClient]:
    """A client reaching the nodes started in this test (and the network for anything else)."""
    async with apps.client(timeout=10.0) as client:
        yield client


async def make_client(
    http: httpx.AsyncClient, url: str, *, binding: str = "JSONRPC", streaming: bool = False
) -> Client:
    card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(
        streaming=streaming, httpx_client=http, supported_protocol_bindings=[binding]
    )
    return ClientFactory(config).create(card)


# The PostgreSQL node test runs only when scripts/test (or the caller) provides a server.
collect_ignore = [] if os.environ.get("A2A_NODE_TEST_PG_URL") else ["test_postgres_node.py"]
