from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastjsonschema import JsonSchemaValueException

from node.errors import GuardError, ToolError
from node.tooling import ToolContext
from tools.web import extract_links, html_links, html_to_text, http_fetch

pytestmark = pytest.mark.network
Call = Callable[..., Awaitable[Any]]


async def test_http_fetch_turns_html_into_readable_text(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    result = await call(http_fetch, web_ctx, url=f"{server}/page")
    assert result["status"] == 200
    assert result["content_type"] == "text/html"
    assert result["url"] == f"{server}/page"
    assert result["truncated"] is False
    text = result["text"]
    assert text.startswith("Test Page\n")
    assert "Welcome\nFirst paragraph with bold text.\nSecond\nline." in text
    assert "- one\n- two" in text
    for noise in ("secret", "color", "Home", "Copyright"):
        assert noise not in text


async def test_http_fetch_returns_json_and_text_as_is(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    result = await call(http_fetch, web_ctx, url=f"{server}/data")
    assert result["content_type"] == "application/json"
    assert result["text"] == '{"items":[1,2,3]}'


async def test_http_fetch_does_not_return_binary(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    result = await call(http_fetch, web_ctx, url=f"{server}/binary")
    assert result["text"] == "(binary content, 600 bytes, not shown)"


async def test_http_fetch_cuts_text_at_max_chars(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    result = await call(http_fetch, web_ctx, url=f"{server}/plain?n=150", max_chars=100)
    assert result["text"] == "x" * 100
    assert result["truncated"] is True


async def test_http_fetch_refuses_bodies_over_max_bytes(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    assert (await call(http_fetch, web_ctx, url=f"{server}/plain?n=50", max_bytes=50))["text"]
    with pytest.raises(GuardError, match="max_bytes=49"):
        await call(http_fetch, web_ctx, url=f"{server}/plain?n=50", max_bytes=49)


async def test_http_fetch_refuses_private_addresses_and_redirects(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    with pytest.raises(GuardError, match="non-public"):
        await call(http_fetch, web_ctx, url="http://10.0.0.1/")
    with pytest.raises(GuardError, match="non-public"):
        await call(http_fetch, web_ctx, url=f"{server}/private")
    with pytest.raises(GuardError, match="only http and https"):
        await call(http_fetch, web_ctx, url="file:///etc/passwd")


async def test_http_fetch_refuses_without_client_or_guard(call: Call, web_ctx: ToolContext) -> None:
    without_guard = ToolContext(http=web_ctx.http)
    without_client = ToolContext(url_guard=web_ctx.url_guard)
    for ctx in (ToolContext(), without_guard, without_client):
        with pytest.raises(ToolError, match="disabled"):
            await call(http_fetch, ctx, url="https://example.org/")


async def test_http_fetch_schema_bounds(call: Call, web_ctx: ToolContext) -> None:
    for bad in ({}, {"url": 5}, {"url": "x", "max_bytes": 0}, {"url": "x", "max_chars": 10**6}):
        with pytest.raises(JsonSchemaValueException):
            await call(http_fetch, web_ctx, **bad)
    assert http_fetch.read_only
    assert http_fetch.concurrency_safe


async def test_extract_links_returns_absolute_unique_http_links(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    links = await call(extract_links, web_ctx, url=f"{server}/page")
    assert [link["url"] for link in links] == [
        f"{server}/",
        f"{server}/about",
        f"{server}/docs/a.html",
        "https://example.org/x",
    ]
    assert links[2]["text"] == "Docs"
    assert len(await call(extract_links, web_ctx, url=f"{server}/page", max_links=2)) == 2


async def test_extract_links_refuses_non_html(
    call: Call, server: str, web_ctx: ToolContext
) -> None:
    with pytest.raises(ToolError, match="not an HTML page"):
        await call(extract_links, web_ctx, url=f"{server}/data")


async def test_html_links_resolves_against_base_url(call: Call) -> None:
    html = '<a href="/">Home</a><a href="about">About</a><a href="../up#x">Up</a>'
    links = await call(html_links, html=html, base_url="https://site.test/dir/")
    assert [link["url"] for link in links] == [
        "https://site.test/",
        "https://site.test/dir/about",
        "https://site.test/up",
    ]


async def test_html_links_honours_base_tag_and_drops_relative_without_base(call: Call) -> None:
    html = '<base href="https://b.test/x/"><a href="y">Y</a>'
    assert await call(html_links, html=html) == [{"url": "https://b.test/x/y", "text": "Y"}]
    assert await call(html_links, html='<a href="rel">R</a>') == []
    assert await call(html_links, html="https://not-markup.test/") == []


def test_html_to_text_handles_plain_text_and_xml_prolog() -> None:
    assert html_to_text("  just text  ") == "just text"
    assert html_to_text('<?xml version="1.0"?><html><p>x</p></html>') == "x"
    assert html_to_text("<html><head><title>T</title></head><body><h1>T</h1></body>") == "T"
