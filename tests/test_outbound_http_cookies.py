"""The outbound client keeps no cookies (it is shared by every caller of the node)."""

from __future__ import annotations

import asyncio

import pytest

from node.outbound_http import outbound_client
from tests.test_outbound_http import raw_server

pytestmark = pytest.mark.network


async def test_a_cookie_one_site_sets_is_never_sent_back() -> None:
    """The client is shared by every caller: one caller's cookie must not reach another's call."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nSet-Cookie: session=alice; Path=/\r\n"
            b"Connection: close\r\n\r\nok"
        )
        await writer.drain()

    async with raw_server(handle) as url, outbound_client(timeout=5.0) as http:
        first = await http.get(url + "/")
        second = await http.get(url + "/")
        assert first.cookies.get("session") == "alice"  # the answer still shows it
        assert not http.cookies
        with pytest.raises(ValueError, match="no cookies"):
            http.cookies = {"session": "bob"}  # type: ignore[assignment]
    assert second.status_code == 200 and len(seen) == 2
    assert b"cookie" not in seen[1].lower()


async def test_urls_parsed_once_still_merge_with_the_base_url_and_params() -> None:
    async with (
        outbound_client(timeout=5.0) as http,
        outbound_client(timeout=5.0, base_url="http://127.0.0.1:9/api/") as based,
    ):
        url = "http://127.0.0.1:9/x"
        assert str(http.build_request("GET", url).url) == url
        assert str(http.build_request("GET", url, params={"a": 1}).url) == url + "?a=1"
        assert str(http.build_request("GET", url).url) == url  # the cached one is untouched
        assert str(based.build_request("GET", "tasks").url) == "http://127.0.0.1:9/api/tasks"
