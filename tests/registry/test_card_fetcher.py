"""The card fetcher's body limits on every way a card can arrive, its IP-literal check, and its
slots giving back what a cancelled or refused waiter took (node/registry/fetcher.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from node.registry import RegistrySettings
from node.registry.errors import Busy, CardTooLarge, HostBusy, UrlRefused
from node.registry.fetcher import CardFetcher, FetchSlots
from node.tooling.guards.urls import UrlGuard
from tests.registry.conftest import LOOPBACK, CardServer


def _cards_app(card: bytes) -> Starlette:
    """The same card as a plain body, gzip-compressed, and chunked (no Content-Length)."""

    async def plain(request: Request) -> Response:
        return Response(card, media_type="application/json")

    async def zipped(request: Request) -> Response:
        headers = {"Content-Encoding": "gzip"}
        return Response(gzip.compress(card), headers=headers, media_type="application/json")

    async def chunked(request: Request) -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for start in range(0, len(card), 1000):
                yield card[start : start + 1000]

        return StreamingResponse(parts(), media_type="application/json")

    return Starlette(
        routes=[Route("/plain", plain), Route("/gzip", zipped), Route("/chunked", chunked)]
    )


@pytest.mark.parametrize("path", ["/plain", "/gzip", "/chunked"])
async def test_every_way_of_sending_a_card_is_held_to_max_card_bytes(serve_app, path) -> None:
    card = json.dumps(CardServer.card("Big", description="x" * 5000)).encode()
    base = await serve_app(lambda url: _cards_app(card))
    guard = UrlGuard(allow_cidrs=list(LOOPBACK))
    small = CardFetcher(guard, RegistrySettings(max_card_bytes=4000))
    large = CardFetcher(guard, RegistrySettings(max_card_bytes=len(card)))
    try:
        with pytest.raises(CardTooLarge):
            await small.fetch(base + path, wait_s=None)
        assert (await large.fetch(base + path, wait_s=None)).body == card
    finally:
        await small.aclose()
        await large.aclose()


async def test_an_ip_literal_refused_once_is_refused_again_and_allowed_ones_pass(
    card_server,
) -> None:
    url = card_server.put_card("/card.json", "Local")
    fetcher = CardFetcher(UrlGuard(), RegistrySettings())  # loopback not allowed
    allowing = CardFetcher(UrlGuard(allow_cidrs=list(LOOPBACK)), RegistrySettings())
    try:
        for _ in range(2):  # the second answer comes from the kept one
            with pytest.raises(UrlRefused, match="non-public"):
                await fetcher.fetch(url, wait_s=None)
            assert (await allowing.fetch(url, wait_s=None)).body is not None
        assert fetcher.requests == 0
    finally:
        await fetcher.aclose()
        await allowing.aclose()


async def test_slots_are_given_back_by_refused_and_cancelled_waiters() -> None:
    slots = FetchSlots(total=2, per_host=1)
    async with slots.slot("http://a", None):
        with pytest.raises(HostBusy):
            async with slots.slot("http://a", 0.05):
                pass
        waiter = asyncio.create_task(slots.acquire("http://a", None))
        await asyncio.sleep(0)  # it waits for a's only slot
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        async with slots.slot("http://b", None):  # the second global slot
            with pytest.raises(Busy):  # c has a host slot, but no global one is left
                async with slots.slot("http://c", 0.05):
                    pass
    # Everything was given back: both hosts and both global slots are free at once.
    async with slots.slot("http://a", 0), slots.slot("http://c", 0):
        pass
    assert not slots._hosts
