"""The web console in a real browser: headless Debian Chromium driven by Playwright.

A three-node network is started once for the module: a registry with a 2 s TTL, the coordinator
and data nodes as uvicorn servers in this process, the text node as its own process (so that it
can die without a word). Each test opens the registry's or the coordinator's ``/ui`` and waits
with Playwright's ``expect`` (polling to a deadline, no fixed sleeps). A screenshot of each step
goes to the test's tmp_path; ``A2A_NODE_UPDATE_SCREENSHOTS=1`` also copies the completed task
page to ``docs/console.png`` (the README's picture).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from a2a.types import TaskState

from node.card import parse_card
from node.client import NodeClient, skill_message, status_text, text_message
from node.network.children import Child
from node.registry.app import build_registry_app
from node.registry.settings import RegistrySettings
from node.server.app import build_node_app
from tests.network.netsupport import (
    TOKEN,
    TOKEN_ENV,
    Processes,
    agents,
    card,
    free_ports,
    wait_for,
)
from tests.servers import free_socket, running, url_of

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"
WAIT_MS = 15_000  # Playwright's deadline for each expectation
SECRET = "console-browser-token-0123456789"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.network,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]

playwright_api = pytest.importorskip("playwright.async_api")
expect = playwright_api.expect
expect.set_options(timeout=WAIT_MS)

SLEEP_TOOL = {
    "name": "sleep",
    "description": "Sleep for some seconds (a slow step, so progress can be watched).",
    "parameters": {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 30}},
        "required": ["seconds"],
    },
    "command": ["sleep", "{seconds}"],
    "read_only": True,
    "timeout": 60,
}
REVIEW = {  # coordinator → data (wait), then text (keywords and statistics, side by side)
    "id": "review",
    "description": "Wait on the data node, then extract keywords and statistics on the text node.",
    "tags": ["text", "demo"],
    "input_schema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The text to review.", "minLength": 1},
            "seconds": {"type": "number", "minimum": 0, "maximum": 10, "default": 1},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "steps": [
        {"id": "wait", "tool": "data__sleep", "arguments": {"seconds": "$input/seconds"}},
        {
            "id": "keywords",
            "tool": "text__keywords",
            "arguments": {"text": "$input/text", "top": 3},
            "after": ["wait"],
        },
        {"id": "stats", "tool": "text__text_stats", "arguments": {"text": "$input/text"}},
    ],
    "output": ["keywords", "stats"],
}
TEXT = "Otters float in kelp. Sea otters crack urchins with stones. Otters sleep holding hands."


@dataclass
class Net:
    registry: str
    urls: dict[str, str]
    text: Child


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def net(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Net]:
    """The registry, coordinator and data node in this process (real uvicorn servers on loopback);
    the text node a real process, so that it can die without a word (SIGKILL)."""
    tmp = tmp_path_factory.mktemp("console-net")
    text_port, *_ = free_ports(1)
    socks = {name: free_socket() for name in ("registry", "coordinator", "data")}
    registry = url_of(socks["registry"])
    urls = {name: url_of(socks[name]) for name in ("coordinator", "data")}
    urls["text"] = f"http://127.0.0.1:{text_port}"
    link = {"url": registry, "token_env": TOKEN_ENV, "heartbeat_s": 0.4, "refresh_s": 0.3}
    coordinator = card("coordinator", peers={"registry": link})
    coordinator["pipelines"] = [*coordinator.get("pipelines", []), REVIEW]
    cards = {
        "coordinator": coordinator,
        "data": card("data", declared_tools=[SLEEP_TOOL], peers={"registry": link}),
    }
    settings = RegistrySettings(
        db=str(tmp / "registry.db"), token=TOKEN, ttl_s=2.0, allow_cidrs=("127.0.0.0/8",)
    )
    procs = Processes(tmp)
    saved = os.environ.get(TOKEN_ENV)
    os.environ[TOKEN_ENV] = TOKEN  # the in-process nodes' registry link reads it
    try:
        async with contextlib.AsyncExitStack() as stack:
            text = await procs.node(card("text", peers={"registry": link}), text_port)
            stack.push_async_callback(procs.close)
            await stack.enter_async_context(
                running(build_registry_app(settings), socks["registry"])
            )
            for name, data in cards.items():
                app = build_node_app(
                    parse_card(data), public_url=urls[name], data_dir=tmp / name, store="sqlite"
                )
                await stack.enter_async_context(running(app, socks[name]))
            await procs.ready(text, urls["text"] + "/readyz", timeout=90.0)  # a loaded machine

            async def registered() -> bool:
                return set(await agents(registry, healthy="true")) == {*cards, "text"}

            await wait_for(registered, timeout=30.0, what="every node registered")

            async def discovered() -> bool:  # the coordinator has found both peers of its pipeline
                async with NodeClient.connect(urls["coordinator"], streaming=False) as client:
                    task = await client.send(skill_message("review", {"text": "a b", "seconds": 0}))
                return "not available" not in status_text(task)

            await wait_for(discovered, timeout=30.0, what="the coordinator to find its peers")
            yield Net(registry, urls, text)
    finally:
        if saved is None:
            os.environ.pop(TOKEN_ENV, None)
        else:
            os.environ[TOKEN_ENV] = saved


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh profile
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            await context.close()


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Any) -> AsyncIterator[Any]:
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        await page.close()
    assert not errors, f"the page raised: {errors}"


async def shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path


async def test_the_network_page_lists_the_agents(net: Net, page: Any, tmp_path: Path) -> None:
    await page.goto(net.registry + "/ui/")
    rows = page.locator("#agents tbody tr[data-agent]")
    await expect(rows).to_have_count(3)
    for name in ("coordinator", "data", "text"):
        row = page.locator(f'tr[data-agent="{name}"]')
        await expect(row).to_have_attribute("data-health", "healthy")
        await expect(row.get_by_role("link", name=f"Console of {name}")).to_have_attribute(
            "href", f"{net.urls[name]}/ui/"
        )
    await expect(page.locator('tr[data-agent="text"]')).to_contain_text("keywords")
    await shot(page, tmp_path, "1-network")

    await page.keyboard.press("Tab")  # keyboard: the skip link first, then the page's controls
    await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()
    link = page.get_by_role("link", name="Console of data")
    await link.focus()
    await expect(page.locator("#updated")).not_to_have_text(await page.inner_text("#updated"))
    await expect(link).to_be_focused()  # still there after the list was reloaded

    await page.get_by_label("Skill id").fill("calculate")  # search as in the registry API
    await page.get_by_role("button", name="Search").click()
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-agent", "data")
    await shot(page, tmp_path, "2-search")

    await page.get_by_role("link", name="Data Node").click()  # the agent's card, from the registry
    await expect(page.get_by_role("heading", level=1)).to_contain_text("Data Node")
    await expect(page.locator("#skill-calculate")).to_be_visible()
    await shot(page, tmp_path, "3-agent")


async def test_a_pipeline_form_shows_live_progress_then_the_artifact(
    net: Net, page: Any, tmp_path: Path
) -> None:
    await page.goto(net.urls["coordinator"] + "/ui/")
    form = page.get_by_role("form", name="Send a task to review")
    await form.get_by_label("text").fill(TEXT)
    await form.get_by_label("seconds").fill("2")
    await shot(page, tmp_path, "1-form")
    await form.get_by_role("button", name="Send to review").click()

    await expect(page).to_have_url(re.compile(r"#/task/"))
    state = page.locator("#task-state [data-state]")
    await expect(state).to_have_attribute("data-state", "working")  # live, while data sleeps
    await expect(page.locator("#updates")).to_contain_text("step stats (text__text_stats) done")
    await shot(page, tmp_path, "2-working")

    await expect(state).to_have_attribute("data-state", "completed")
    artifact = page.locator('#artifacts .artifact[data-name="review"]')
    await expect(artifact).to_contain_text("otters")  # the keywords, as a data tree
    calls = page.locator("#calls li.call")
    await expect(calls).to_have_count(4)  # review itself, then data__sleep, text__keywords, stats
    await expect(page.locator('#calls li[data-tool="data__sleep"]')).to_have_attribute(
        "data-peer", "data"
    )
    await expect(page.locator('#calls li[data-tool="text__keywords"]')).to_have_attribute(
        "data-peer", "text"
    )
    picture = await shot(page, tmp_path, "3-completed")
    if os.environ.get("A2A_NODE_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(picture, DOCS_SHOT)


async def test_a_task_failing_on_a_peer_shows_the_reason_and_the_node(
    net: Net, page: Any, tmp_path: Path
) -> None:
    await page.goto(net.urls["coordinator"] + "/ui/")
    form = page.get_by_role("form", name="Send a task to compute")
    await form.get_by_label("expression").fill("1 / 0")
    await form.get_by_role("button", name="Send to compute").click()
    await expect(page.locator("#task-state [data-state]")).to_have_attribute("data-state", "failed")
    failure = page.get_by_role("alert")
    await expect(failure.locator(".failed-node")).to_have_text("data")
    await expect(failure).to_contain_text("division by zero")
    await expect(page.locator('#calls li[data-tool="data__calculate"]')).to_contain_text(
        "division by zero"
    )
    await shot(page, tmp_path, "1-failed")

    await page.get_by_role("link", name="Recent tasks").click()  # ListTasks, filtered by state
    await page.get_by_label("State").select_option("TASK_STATE_FAILED")
    await page.get_by_role("button", name="Filter").click()
    rows = page.locator("#tasks tbody tr")
    await expect(rows.first.locator("[data-state]")).to_have_attribute("data-state", "failed")
    for state in await rows.locator("[data-state]").all():
        await expect(state).to_have_attribute("data-state", "failed")
    await shot(page, tmp_path, "2-tasks")


async def test_an_input_required_task_takes_the_reply_typed_in_the_page(
    net: Net, page: Any, tmp_path: Path
) -> None:
    async with NodeClient.connect(net.urls["coordinator"], streaming=False) as client:
        task = await client.send(skill_message("review", {"seconds": 0}))  # no text: it asks
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, status_text(task)
    await page.goto(f"{net.urls['coordinator']}/ui/#/task/{task.id}")
    state = page.locator("#task-state [data-state]")
    await expect(state).to_have_attribute("data-state", "input required")
    reply = page.locator("#reply")
    await expect(reply.locator(".question")).to_contain_text("needs: text")
    form = page.get_by_role("form", name="Reply with the missing arguments")
    await expect(form.get_by_label("seconds")).to_have_count(0)  # only what is missing
    await shot(page, tmp_path, "1-asked")

    await form.get_by_role("button", name="Reply").click()  # empty: the browser refuses it
    await expect(state).to_have_attribute("data-state", "input required")
    await form.get_by_label("text").fill(TEXT)
    await form.get_by_role("button", name="Reply").click()
    await expect(state).to_have_attribute("data-state", "completed")
    await expect(page.locator("#reply")).to_have_count(0)
    await expect(page.locator('#artifacts .artifact[data-name="review"]')).to_contain_text("otters")
    await shot(page, tmp_path, "2-completed")
    async with NodeClient.connect(net.urls["coordinator"], streaming=False) as client:
        done = await client.get(task.id)  # the same task, resumed, not a new one
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.context_id == task.context_id


async def test_a_request_no_skill_fits_offers_the_candidates_as_buttons(
    net: Net, page: Any, tmp_path: Path
) -> None:
    async with NodeClient.connect(net.urls["coordinator"], streaming=False) as client:
        task = await client.send(text_message("zebra quokka"))  # words no skill is about
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, status_text(task)
    await page.goto(f"{net.urls['coordinator']}/ui/#/task/{task.id}")
    choices = page.locator("#reply .choices")
    await expect(choices.get_by_role("button", name="Run review")).to_be_visible()
    await shot(page, tmp_path, "1-choices")
    await choices.get_by_role("button", name="Run review").click()  # review runs on the text
    state = page.locator("#task-state [data-state]")
    await expect(state).to_have_attribute("data-state", "completed")
    await expect(page.locator('#artifacts .artifact[data-name="review"]')).to_contain_text("zebra")


async def test_a_node_with_auth_takes_the_token_typed_in_the_page(
    page: Any, tmp_path: Path
) -> None:
    data = card("data", auth={"bearer_tokens": [{"secret": SECRET, "principal": "operator"}]})
    sock = free_socket()
    app = build_node_app(
        parse_card(data), public_url=url_of(sock), data_dir=tmp_path / "guarded", store="memory"
    )
    async with running(app, sock) as url:
        await page.goto(url + "/ui/#/tasks")
        await expect(page.get_by_role("alert")).to_contain_text("401")  # the page, not the data
        await page.get_by_label("Access token").fill(SECRET)
        await page.get_by_role("button", name="Use").click()
        await expect(page.locator("#tasks tbody")).to_contain_text("No task.")
        assert await page.evaluate("Object.keys(localStorage).length") == 0  # this tab only

        await page.get_by_role("link", name="Node and skills").click()
        form = page.get_by_role("form", name="Send a task to calculate")
        await form.get_by_label("expression").fill("6 * 7")
        await form.get_by_role("button", name="Send to calculate").click()
        state = page.locator("#task-state [data-state]")
        await expect(state).to_have_attribute("data-state", "completed")
        await expect(page.locator("#artifacts")).to_contain_text("42")
        await shot(page, tmp_path, "1-token")

        async with NodeClient.connect(url, token=SECRET, streaming=False) as client:
            for n in range(11):  # 12 tasks of this principal: two pages of 10
                await client.send(skill_message("calculate", {"expression": f"{n} + 1"}))
        await page.get_by_role("link", name="Recent tasks").click()
        rows = page.locator("#tasks tbody tr")
        await expect(rows).to_have_count(10)
        await page.get_by_role("button", name="Older").click()
        await expect(rows).to_have_count(2)
        await expect(page.get_by_role("button", name="Older")).to_be_disabled()
        await page.get_by_role("button", name="Newer").click()
        await expect(rows).to_have_count(10)
        await shot(page, tmp_path, "2-pages")


async def test_a_node_going_down_turns_unhealthy(net: Net, page: Any, tmp_path: Path) -> None:
    await page.goto(net.registry + "/ui/")
    row = page.locator('tr[data-agent="text"]')
    await expect(row).to_have_attribute("data-health", "healthy")
    net.text.signal(signal.SIGKILL)  # no goodbye: its heartbeats just stop
    await net.text.wait()
    await expect(row).to_have_attribute("data-health", "unhealthy")  # TTL 2 s, page refreshes
    await expect(page.locator('tr[data-agent="data"]')).to_have_attribute("data-health", "healthy")
    await shot(page, tmp_path, "1-unhealthy")
