"""HTML to text in linear time, on a bounded input, in a killable worker; thread pool kept free."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import time

from node.errors import ErrorKind
from node.tooling import Toolbox, ToolRunner
from node.tooling.isolation import default_pool
from tools.web import MAX_HTML_CHARS, html_links, html_to_text, page_links

BLOCK = '<div><p>Some <b>text</b> and <a href="/x{n}">link {n}</a></p><ul><li>one</li></ul></div>\n'


def page(size: int) -> str:
    parts, total, n = [], 0, 0
    while total < size:
        part = BLOCK.format(n=n)
        parts.append(part)
        total += len(part)
        n += 1
    return "".join(parts)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_large_page_converts_in_linear_time() -> None:
    html = page(500_000)  # BeautifulSoup's inserts made this ~15 s, and 2 MB ~4 minutes
    start = time.monotonic()
    text = html_to_text(html)
    assert time.monotonic() - start < 2.0
    assert text.startswith("Some text and link 0\n- one\nSome text and link 1\n")
    links = page_links(html, "https://site.test/", 1000)
    assert links[:2] == [
        {"url": "https://site.test/x0", "text": "link 0"},
        {"url": "https://site.test/x1", "text": "link 1"},
    ]


def test_only_the_first_max_html_chars_are_parsed() -> None:
    html = "<p>head</p>" + "<b>x</b>" * (MAX_HTML_CHARS // 8) + "<p>tail</p>"
    text = html_to_text(html)
    assert text.startswith("head\nxxx")
    assert "tail" not in text
    assert page_links(html + '<a href="https://late.test/">late</a>', "", 10) == []


async def test_a_conversion_that_times_out_is_killed_with_its_worker() -> None:
    await default_pool().start()
    hasty = copy.copy(html_links)
    hasty.policy = dataclasses.replace(hasty.policy, timeout=0.02)
    run = ToolRunner(Toolbox([hasty]))
    call = asyncio.create_task(run.run_one("html_links", {"html": page(3_000_000)}))
    while not default_pool().busy:
        assert not call.done(), "the conversion never reached a worker"
        await asyncio.sleep(0.001)
    (worker,) = default_pool().busy
    result = await call
    assert result.error_kind == ErrorKind.TIMEOUT
    assert "worker process was killed" in (result.error or "")
    deadline = time.monotonic() + 2.0
    while not gone(worker):
        assert time.monotonic() < deadline, "the worker outlived its call"
        await asyncio.sleep(0.005)


async def test_the_thread_pool_stays_free_while_conversions_run() -> None:
    html = page(1_000_000)
    runner = ToolRunner(Toolbox([html_links]))
    calls = [asyncio.create_task(runner.run_one("html_links", {"html": html})) for _ in range(8)]
    await asyncio.sleep(0)
    latencies = []
    while not all(c.done() for c in calls):
        start = time.perf_counter()
        await asyncio.to_thread(int)
        latencies.append(time.perf_counter() - start)
    results = await asyncio.gather(*calls)
    assert all(r.ok for r in results), [r.error for r in results]
    assert latencies and max(latencies) < 0.1, f"slowest thread-pool call {max(latencies):.3f} s"
