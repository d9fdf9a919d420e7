"""Fixtures for the peer-layer tests (helpers live in ``peers_support``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from node.outbound_http import outbound_client
from node.peers.grpc_channels import GrpcChannels
from tests.peers.foreign_peers import StartPlain
from tests.peers.foreign_peers import start_plain as start_plain_peer
from tests.peers.peers_support import Peer, PeerFactory, Recorder, peer_app, peer_card
from tests.servers import free_socket, running, url_of


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """The node's own outbound client (httpx over aiohttp), as the runtime builds it."""
    async with outbound_client(timeout=5.0) as client:
        yield client


@pytest.fixture
async def start_peer() -> AsyncIterator[PeerFactory]:
    """``peer = await start_peer(agent_id="b", wrap=lambda app: Flaky(app, 2), ...)``."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            *, wrap: Callable[[ASGIApp], ASGIApp] | None = None, **card_kw: Any
        ) -> Peer:
            sock = free_socket()
            card, recorder = peer_card(url_of(sock), **card_kw), Recorder()
            app: ASGIApp = peer_app(card, recorder)
            url = await stack.enter_async_context(running(wrap(app) if wrap else app, sock))
            return Peer(url, card, recorder)

        yield start


@pytest.fixture
async def channels() -> AsyncIterator[GrpcChannels]:
    """One gRPC channel factory for the test's peer clients, closed after the test."""
    shared = GrpcChannels()
    yield shared
    await shared.aclose()


@pytest.fixture
async def start_plain() -> AsyncIterator[StartPlain]:
    """``peer = await start_plain("task", bindings=("GRPC",), v03=False)``: a plain a2a-sdk peer
    (``tests.peers.foreign_peers``) running until the test ends."""
    async with contextlib.AsyncExitStack() as stack:
        yield functools.partial(start_plain_peer, stack)
