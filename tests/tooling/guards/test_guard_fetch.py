"""UrlGuard.fetch against a live server on 127.0.0.1; only that server's /32 is allowed.

Every test runs over httpx's own transport and over the node's outbound one (aiohttp's pool,
:mod:`node.outbound_http`), which is what a running node's tools fetch through.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from node.errors import GuardError, ToolError, ToolTimeout
from node.outbound_http import OutboundTransport
from node.tooling.guards import UrlGuard

pytestmark = pytest.mark.network


class RecordingTransport(httpx.AsyncBaseTransport):
    """A real transport that records every address a request was sent to."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.hosts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.hosts.append(request.url.host)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(params=["httpx", "aiohttp"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[RecordingTransport]:
    inner = httpx.AsyncHTTPTransport() if request.param == "httpx" else OutboundTransport()
    transport = RecordingTransport(inner)
    yield transport
    await transport.aclose()


@pytest.fixture
async def client(transport: RecordingTransport) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=transport) as client:
        yield client


GUARD = UrlGuard(allow_cidrs=["127.0.0.1/32"])


async def test_get_returns_status_headers_body_and_final_url(
    server: str, client: httpx.AsyncClient
) -> None:
    response = await GUARD.fetch(client, "GET", f"{server}/echo")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.json()["host"] == server.removeprefix("http://")
    assert response.url == f"{server}/echo"


@pytest.mark.usefixtures("localhost_only")
async def test_connects_to_the_checked_address_with_the_original_host_header(
    server: str, client: httpx.AsyncClient, transport: RecordingTransport
) -> None:
    port = server.rsplit(":", 1)[1]
    response = await GUARD.fetch(client, "GET", f"http://localhost:{port}/echo")
    assert transport.hosts == ["127.0.0.1"]
    assert response.json()["host"] == f"localhost:{port}"
    assert response.url == f"http://localhost:{port}/echo"


async def test_post_sends_json(server: str, client: httpx.AsyncClient) -> None:
    response = await GUARD.fetch(client, "POST", f"{server}/echo", json={"a": 1})
    assert response.json()["body"] == '{"a":1}'


async def test_redirect_within_allowed_hosts_is_followed(
    server: str, client: httpx.AsyncClient, transport: RecordingTransport
) -> None:
    response = await GUARD.fetch(client, "GET", f"{server}/redirect/self")
    assert response.status_code == 200
    assert response.url == f"{server}/echo"
    assert len(transport.hosts) == 2


async def test_303_turns_post_into_get(server: str, client: httpx.AsyncClient) -> None:
    url = f"{server}/redirect/self?code=303"
    response = await GUARD.fetch(client, "POST", url, content=b"payload")
    assert response.json() == {
        "method": "GET",
        "host": server[7:],
        "body": "",
        "authorization": None,
    }


async def test_307_keeps_method_and_body(server: str, client: httpx.AsyncClient) -> None:
    url = f"{server}/redirect/self?code=307"
    response = await GUARD.fetch(client, "POST", url, content=b"payload")
    assert response.json()["method"] == "POST"
    assert response.json()["body"] == "payload"


@pytest.mark.parametrize("name", ["private", "v6", "metadata"])
async def test_redirect_to_a_refused_address_never_connects(
    server: str, client: httpx.AsyncClient, transport: RecordingTransport, name: str
) -> None:
    with pytest.raises(GuardError, match="non-public"):
        await GUARD.fetch(client, "GET", f"{server}/redirect/{name}")
    assert transport.hosts == ["127.0.0.1"]  # only the first hop was ever sent


async def test_redirect_to_another_scheme_is_refused(
    server: str, client: httpx.AsyncClient
) -> None:
    with pytest.raises(GuardError, match="only http and https"):
        await GUARD.fetch(client, "GET", f"{server}/redirect/ftp")


async def test_too_many_redirects(server: str, transport: RecordingTransport) -> None:
    async with httpx.AsyncClient(transport=transport) as client:
        guard = UrlGuard(allow_cidrs=["127.0.0.1/32"], max_redirects=3)
        with pytest.raises(GuardError, match="more than 3 redirects"):
            await guard.fetch(client, "GET", f"{server}/redirect/loop")
    assert len(transport.hosts) == 4


async def test_refused_first_url_never_connects(
    client: httpx.AsyncClient, transport: RecordingTransport
) -> None:
    with pytest.raises(GuardError):
        await UrlGuard().fetch(client, "GET", "http://127.0.0.1:9/")
    assert transport.hosts == []


async def test_body_larger_than_max_bytes_with_content_length(
    server: str, client: httpx.AsyncClient
) -> None:
    assert len((await GUARD.fetch(client, "GET", f"{server}/big?n=100", max_bytes=100)).content)
    with pytest.raises(GuardError, match="max_bytes=99"):
        await GUARD.fetch(client, "GET", f"{server}/big?n=100", max_bytes=99)


async def test_streamed_body_larger_than_max_bytes(server: str, client: httpx.AsyncClient) -> None:
    assert len((await GUARD.fetch(client, "GET", f"{server}/stream")).content) == 10_000
    with pytest.raises(GuardError, match="max_bytes=5000"):
        await GUARD.fetch(client, "GET", f"{server}/stream", max_bytes=5000)


async def test_timeout_bounds_the_whole_fetch(server: str, client: httpx.AsyncClient) -> None:
    with pytest.raises(ToolTimeout, match=r"longer than 0\.2 s"):
        await GUARD.fetch(client, "GET", f"{server}/slow", timeout=0.2)


async def test_connection_failure_is_a_tool_error(client: httpx.AsyncClient) -> None:
    with pytest.raises(ToolError, match="ConnectError") as info:
        await GUARD.fetch(client, "GET", "http://127.0.0.1:1/")
    assert isinstance(info.value.__cause__, httpx.ConnectError)


async def test_text_uses_the_declared_charset(server: str, client: httpx.AsyncClient) -> None:
    response = await GUARD.fetch(client, "GET", f"{server}/latin")
    assert response.encoding == "iso8859-1"
    assert response.text == "café"


async def test_invalid_json_is_a_tool_error(server: str, client: httpx.AsyncClient) -> None:
    response = await GUARD.fetch(client, "GET", f"{server}/big?n=3")
    with pytest.raises(ToolError, match="not valid JSON"):
        response.json()


@pytest.mark.usefixtures("localhost_only")
async def test_credentials_are_dropped_on_cross_origin_redirect(
    server: str, client: httpx.AsyncClient
) -> None:
    headers = {"Authorization": "Bearer s3cret"}
    same = await GUARD.fetch(client, "GET", f"{server}/redirect/self", headers=headers)
    assert same.json()["authorization"] == "Bearer s3cret"
    other = await GUARD.fetch(client, "GET", f"{server}/redirect/localhost", headers=headers)
    assert other.url.startswith("http://localhost:")
    assert other.json()["authorization"] is None
