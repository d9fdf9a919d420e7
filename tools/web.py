"""Web tools: fetch a page as readable text, and list the links of a page or of HTML.

Every request goes through the context's SSRF guard (:class:`node.tooling.guards.UrlGuard`) and
shared HTTP client; a context without them refuses to fetch.

HTML is parsed with lexbor (``selectolax``), in time linear in the input, and only its first
``MAX_HTML_CHARS`` characters (5,000,000: under a second of work) are parsed; ``http_fetch`` then
reports ``truncated``. Parsing runs in a worker process (``isolation="process"`` for
``html_links``, :func:`node.tooling.run_in_process` for the fetching tools), so it never holds the
event loop's GIL, never occupies the thread pool, and a conversion that outlives its call's
timeout is killed with its worker instead of keeping a core busy.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urldefrag, urljoin

from pydantic import Field
from selectolax.lexbor import LexborHTMLParser

from node.errors import ToolExecutionError
from node.tooling import ToolContext, run_in_process, tool
from node.tooling.guards import FetchResponse

__all__ = [
    "MAX_HTML_CHARS",
    "extract_links",
    "html_links",
    "html_to_text",
    "http_fetch",
    "page_links",
]

FETCH_TIMEOUT_S = 20.0
MAX_HTML_CHARS = 5_000_000  # characters of HTML parsed; the rest is ignored
_NOISE = ["script", "style", "noscript", "template", "svg", "nav", "footer", "aside", "form"]
_NOISE += ["iframe", "button", "select", "head", "title"]
_BLOCKS = ["p", "div", "section", "article", "main", "header", "blockquote", "pre", "table", "tr"]
_BLOCKS += ["ul", "ol", "li", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "figure"]
_BLOCK_SELECTOR = ",".join(_BLOCKS)
_NOISE_SELECTOR = ",".join(_NOISE)
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript")

MaxBytes = Annotated[int, Field(ge=1, le=10_000_000)]
MaxChars = Annotated[int, Field(ge=100, le=200_000)]
MaxLinks = Annotated[int, Field(ge=1, le=1000)]


def html_to_text(html: str) -> str:
    """Readable text of an HTML document: title first, one block per line, no scripts or menus.

    Only the first ``MAX_HTML_CHARS`` characters are parsed.
    """
    if "<" not in html:
        return html.strip()
    tree = LexborHTMLParser(html[:MAX_HTML_CHARS])
    title_node = tree.css_first("title")
    title = " ".join(title_node.text(separator=" ").split()) if title_node else ""
    root = tree.root
    if root is None:
        return title
    # Select first, then change the tree (mutating while iterating is unsafe). Noise goes last
    # first: a nested noise element is removed before the one holding it.
    for noise in reversed(root.css(_NOISE_SELECTOR)):
        noise.decompose()
    for br in root.css("br"):
        br.replace_with("\n")
    for item in root.css("li"):
        first = item.first_child
        if first is None:
            item.insert_child("- ")
        else:
            first.insert_before("- ")
    for block in root.css(_BLOCK_SELECTOR):
        block.insert_before("\n")
        block.insert_after("\n")
    lines = (" ".join(line.split()) for line in root.text(separator="").splitlines())
    body = "\n".join(line for line in lines if line)
    return f"{title}\n\n{body}".strip() if title and not body.startswith(title) else body


def page_links(html: str, base_url: str, limit: int) -> list[dict[str, str]]:
    """The first ``limit`` distinct absolute http(s) links of ``html`` with their text.

    Relative links resolve against a ``<base href>``, else ``base_url``; only the first
    ``MAX_HTML_CHARS`` characters are parsed.
    """
    if "<" not in html:
        return []
    tree = LexborHTMLParser(html[:MAX_HTML_CHARS])
    base_tag = tree.css_first("base[href]")
    base_href = base_tag.attributes.get("href") if base_tag else None
    base = urljoin(base_url, base_href) if base_href else base_url
    seen: set[str] = set()
    links: list[dict[str, str]] = []
    for anchor in tree.css("a[href]"):
        url = urldefrag(urljoin(base, (anchor.attributes.get("href") or "").strip())).url
        if not url.startswith(("http://", "https://")) or url in seen:
            continue
        seen.add(url)
        text = " ".join(anchor.text(separator=" ").split())
        links.append({"url": url, "text": text[:200]})
        if len(links) >= limit:
            break
    return links


async def _get(ctx: ToolContext, url: str, max_bytes: int) -> FetchResponse:
    if ctx.url_guard is None or ctx.http is None:
        raise ToolExecutionError(
            "fetching URLs is disabled on this node (no HTTP client or URL guard)"
        )
    return await ctx.url_guard.fetch(
        ctx.http, "GET", url, timeout=FETCH_TIMEOUT_S, max_bytes=max_bytes
    )


def _is_html(response: FetchResponse) -> bool:
    return response.content_type in ("text/html", "application/xhtml+xml") or (
        not response.content_type and response.content.lstrip()[:15].lower().startswith(b"<")
    )


def _is_text(response: FetchResponse) -> bool:
    ctype = response.content_type
    if not ctype:
        return b"\x00" not in response.content[:8192]
    return ctype.startswith("text/") or ctype in _TEXT_TYPES or ctype.endswith(("+json", "+xml"))


@tool(
    read_only=True,
    tags=("web", "http"),
    examples=("Fetch https://example.org/ and give me its text",),
)
async def http_fetch(
    url: str, ctx: ToolContext, max_bytes: MaxBytes = 2_000_000, max_chars: MaxChars = 20_000
) -> dict[str, Any]:
    """Fetch a public http(s) URL with GET and return its status, content type and text.

    HTML pages are turned into readable text (title first, scripts and menus dropped; only the
    first 5,000,000 characters of HTML are read); JSON, XML and other text is returned as is;
    binary content is not returned. Private, loopback and link-local addresses are refused
    unless the node allows them.

    Args:
        url: The absolute http or https URL to fetch.
        max_bytes: Refuse responses whose body is larger than this many bytes.
        max_chars: Cut the returned text after this many characters.
    """
    response = await _get(ctx, url, max_bytes)
    cut = False
    if _is_html(response):
        html = response.text
        cut = len(html) > MAX_HTML_CHARS
        text = await run_in_process(html_to_text, html)
    elif _is_text(response):
        text = response.text
    else:
        text = f"(binary content, {len(response.content)} bytes, not shown)"
    return {
        "status": response.status_code,
        "content_type": response.content_type,
        "url": response.url,
        "text": text[:max_chars],
        "truncated": cut or len(text) > max_chars,
    }


@tool(read_only=True, tags=("web", "html"), examples=("List the links on https://example.org/",))
async def extract_links(
    url: str, ctx: ToolContext, max_links: MaxLinks = 200, max_bytes: MaxBytes = 2_000_000
) -> list[dict[str, str]]:
    """Fetch an HTML page and list its links as absolute http(s) URLs with their text.

    Args:
        url: The absolute http or https URL of the page.
        max_links: Return at most this many links (first ones in the page, no duplicates).
        max_bytes: Refuse pages larger than this many bytes.
    """
    response = await _get(ctx, url, max_bytes)
    if not _is_html(response):
        raise ToolExecutionError(
            f"{url} is not an HTML page (content type {response.content_type!r})"
        )
    return await run_in_process(page_links, response.text, response.url, max_links)


@tool(read_only=True, isolation="process", tags=("html",))
def html_links(
    html: Annotated[str, Field(max_length=10_000_000)],
    base_url: str = "",
    max_links: MaxLinks = 200,
) -> list[dict[str, str]]:
    """List the links of an HTML document as absolute http(s) URLs with their text.

    Args:
        html: The HTML source.
        base_url: The page's URL, used to make relative links absolute (a <base> tag wins);
            without it, relative links are left out.
        max_links: Return at most this many links (first ones in the page, no duplicates).
    """
    return page_links(html, base_url, max_links)
