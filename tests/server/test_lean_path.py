"""The lean path and the SDK path give the same tasks, side by side.

Two nodes from one card, in-process on their own SQLite files: one with ``server.lean_path`` on,
one with it off. Every request goes to both through the a2a-sdk client (JSON-RPC, and HTTP+JSON
for a few); the tasks and errors they answer (and later read back, list, or read after a restart)
must be equal once ids are replaced by their order of first appearance and timestamps blanked.
``LEAN`` counts the sends the lean path served, so a case that should take it cannot silently
fall back to the SDK (and pass by comparing the SDK with itself).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.server.context import ServerCallContext
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from node.card import parse_card
from node.client import data_message, skill_message, text_message
from node.errors import ConfigError
from node.peers.hops import HOP
from node.server.app import build_node_app
from node.server.lean_path import LEAN_PATH_ENV, LeanPath, lean_path_enabled
from node.tooling import tool
from tests.server.conftest import TEST_TOOLS, card_data, make_client
from tests.servers import InProcessApps

LEAN: Counter[str] = Counter()
AUTH_ENV = {"ALICE_TOKEN": "alice-token-123", "BOB_TOKEN": "bob-token-456"}
AUTH = {
    "bearer_tokens": [
        {"secret": "${ALICE_TOKEN}", "principal": "alice"},
        {"secret": "${BOB_TOKEN}", "principal": "bob", "capabilities": ["admin"]},
    ],
}


@tool(read_only=True, inline=True, requires=("admin",))
def admin_sum(a: int, b: int) -> int:
    """Add two integers, for admins only (a cheap inline tool with a capability).

    Args:
        a: The first term.
        b: The second term.
    """
    return a + b


@tool(read_only=True, inline=True, max_output=10)
def long_word(n: int) -> str:
    """A word longer than its tool's output bound (the rest goes to a task artifact).

    Args:
        n: How many letters.
    """
    return "a" * n


@pytest.fixture(autouse=True)
def count_lean_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    LEAN.clear()
    send = LeanPath.send

    async def counted(
        self: LeanPath, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | None:
        task = await send(self, params, context)
        LEAN["served" if task is not None else "declined"] += 1
        return task

    monkeypatch.setattr(LeanPath, "send", counted)


class Twin:
    """The same node twice, lean path on and off, each with its own data directory."""

    def __init__(self, apps: InProcessApps, root: Path, **card: Any) -> None:
        self.apps, self.root, self.card = apps, root, card
        self.urls: dict[bool, str] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[dict[bool, str]]:
        """Both nodes until the block ends (then their lifespans close: a restart)."""
        async with contextlib.AsyncExitStack() as stack:
            for lean in (True, False):
                server = {"lean_path": lean}
                card = parse_card(card_data(server=server, **self.card), env=AUTH_ENV)
                self.urls[lean] = await stack.enter_async_context(
                    self.apps.serving(self._factory(card, lean), name=f"lean-{lean}".lower())
                )
            yield self.urls

    def _factory(self, card: Any, lean: bool) -> Callable[[str], Any]:
        return lambda url: build_node_app(
            card,
            public_url=url,
            data_dir=self.root / str(lean),
            store="sqlite",
            tools=[*TEST_TOOLS, admin_sum, long_word],
        )


DURATION = re.compile(r"in \d+ ms")
NODE_URL = re.compile(r"lean-(true|false)-\d+\.test")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Blank:
    """Ids → their order of first appearance (per node); timestamps and durations blanked."""

    IDS = ("id", "contextId", "taskId", "artifactId")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.counter = itertools.count(1)

    def name(self, an_id: str) -> str:
        return self.names.setdefault(an_id, f"#{next(self.counter)}")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, Task | Message):
            return self(MessageToDict(value))
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):  # ids and durations inside error messages and status texts
            value = NODE_URL.sub("<node>", UUID.sub(lambda m: self.name(m.group()), value))
            return DURATION.sub("in <n> ms", value)
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        agent = value.get("role") == "ROLE_AGENT"
        for key, item in value.items():
            if key in ("timestamp", "started_at", "duration_ms"):  # wall-clock time
                out[key] = "ts"
            elif key in self.IDS or (key == "messageId" and agent):
                out[key] = self.name(item)
            else:
                out[key] = self(item)
        return out


async def send(client: Client, message: Message, **config: Any) -> Task:
    request = SendMessageRequest(message=message)
    if config:
        request.configuration.CopyFrom(SendMessageConfiguration(**config))
    events = [event async for event in client.send_message(request)]
    assert len(events) == 1
    return events[0].task


async def outcome(client: Client, message: Message, **config: Any) -> Any:
    """The task answered, or the error's class and message."""
    try:
        return await send(client, message, **config)
    except A2AError as exc:
        return f"{type(exc).__name__}: {exc}"


def same_message(message: Message) -> Callable[[], Message]:
    """A fresh copy of ``message`` for each node (the client fills in fields as it sends)."""

    def fresh() -> Message:
        copy = Message()
        copy.CopyFrom(message)
        return copy

    return fresh


@pytest.fixture
async def http(apps: InProcessApps) -> AsyncIterator[httpx.AsyncClient]:
    async with apps.client(timeout=15) as client:
        yield client


async def clients(
    http: httpx.AsyncClient, urls: dict[bool, str], binding: str
) -> dict[bool, Client]:
    return {lean: await make_client(http, url, binding=binding) for lean, url in urls.items()}


CASES: list[tuple[str, Message, dict[str, Any], bool]] = [
    # (case, message, configuration, served by the lean path)
    ("success", skill_message("calculate", {"expression": "2 * (3 + 4)"}), {}, True),
    ("tool failure", skill_message("calculate", {"expression": "1/0"}), {}, True),
    (
        "batch, one failure",
        data_message(
            {
                "calls": [
                    {"tool": "calculate", "arguments": {"expression": "1+1"}},
                    {"tool": "calculate", "arguments": {"expression": "1/0"}},
                ]
            }
        ),
        {},
        True,
    ),
    (
        "historyLength 0",
        skill_message("calculate", {"expression": "3"}),
        {"history_length": 0},
        True,
    ),
    (
        "historyLength 5",
        skill_message("calculate", {"expression": "4"}),
        {"history_length": 5},
        True,
    ),
    ("invalid arguments", skill_message("calculate", {"expression": ""}), {}, False),
    ("bad argument type", skill_message("calculate", {"expression": 7}), {}, True),
    ("unknown skill", skill_message("no_such_skill", {}), {}, False),
    ("missing argument", skill_message("calculate", {}), {}, False),
    ("free text", text_message("what is two plus two?"), {}, False),
    ("empty text part", text_message("", skill="calculate"), {}, False),
    ("text to a skill", text_message("1+2", skill="calculate"), {}, True),
    ("output over its bound", skill_message("long_word", {"n": 25}), {}, True),
    ("capability missing", skill_message("admin_sum", {"a": 1, "b": 2}), {}, False),
    ("thread tool", skill_message("text_stats", {"text": "a b c"}), {}, False),
    ("async tool", skill_message("slow", {"seconds": 0}), {}, False),
    ("internal tool", skill_message("secret_helper", {}), {}, False),
    (
        "return immediately",
        skill_message("calculate", {"expression": "5"}),
        {"return_immediately": True},
        False,
    ),
    (
        "hop limit",
        skill_message(
            "calculate", {"expression": "6"}, metadata={HOP: {"chain": ["a", "b", "c", "d", "e"]}}
        ),
        {},
        False,
    ),
]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_both_paths_answer_every_case_with_the_same_task(
    apps: InProcessApps, tmp_path: Path, http: httpx.AsyncClient, binding: str
) -> None:
    twin = Twin(apps, tmp_path)
    blank = {True: Blank(), False: Blank()}
    answers: dict[bool, list[Any]] = {True: [], False: []}
    async with twin.running() as urls:
        client = await clients(http, urls, binding)
        for _, message, config, _ in CASES:
            fresh = same_message(message)
            for lean in (True, False):
                answers[lean].append(await outcome(client[lean], fresh(), **config))
    served = sum(1 for *_, lean in CASES if lean)
    assert LEAN["served"] == served, LEAN
    for (case, *_), on, off in zip(CASES, answers[True], answers[False], strict=True):
        assert blank[True](on) == blank[False](off), case


async def errors_or(call: Any) -> Any:
    try:
        return await call
    except A2AError as exc:
        return f"{type(exc).__name__}: {exc}"


async def story(urls: dict[bool, str], apps: InProcessApps, lean: bool, log: list[Any]) -> None:
    """Alice and Bob on one node: contexts, retries, follow-ups, scoping, lists."""
    url = urls[lean]
    async with (
        apps.client(headers={"Authorization": "Bearer alice-token-123"}) as alice_http,
        apps.client(headers={"Authorization": "Bearer bob-token-456"}) as bob_http,
    ):
        alice = await make_client(alice_http, url)
        bob = await make_client(bob_http, url)
        first_message = skill_message("calculate", {"expression": "40 + 2"})
        first_message.message_id = "story-first"
        first = await send(alice, same_message(first_message)())
        log.append(first)
        same_context = skill_message("calculate", {"expression": "2 ** 10"})
        same_context.message_id, same_context.context_id = "story-second", first.context_id
        log.append(await send(alice, same_context))
        log.append(await send(alice, same_message(first_message)()))  # a retry: the first task
        changed = skill_message("calculate", {"expression": "1"})
        changed.message_id = "story-first"  # the same id, other parts: refused
        log.append(await outcome(alice, changed))
        follow_up = skill_message("calculate", {"expression": "3"}, task=first)
        follow_up.message_id = "story-third"
        log.append(await outcome(alice, follow_up))  # the task is terminal: refused
        log.append(await send(bob, same_message(first_message)()))  # Bob's own task, same id
        log.append(await errors_or(bob.get_task(GetTaskRequest(id=first.id))))  # not Bob's
        admin = skill_message("admin_sum", {"a": 2, "b": 3})
        admin.message_id = "story-admin"
        log.append(await send(bob, same_message(admin)()))  # Bob may
        log.append(await send(alice, same_message(admin)()))  # Alice may not
        for client in (alice, bob):
            page = await client.list_tasks(ListTasksRequest(page_size=50, include_artifacts=True))
            log.append(list(page.tasks))
            log.append(page.total_size)


async def after_restart(
    urls: dict[bool, str], apps: InProcessApps, lean: bool, log: list[Any]
) -> None:
    """Every task of the story read back after the node restarted, and the list again."""
    tasks = [t for t in log if isinstance(t, Task)]
    async with apps.client(headers={"Authorization": "Bearer alice-token-123"}) as http:
        alice = await make_client(http, urls[lean])
        for task in tasks:
            log.append(await errors_or(alice.get_task(GetTaskRequest(id=task.id))))
            log.append(
                await errors_or(alice.get_task(GetTaskRequest(id=task.id, history_length=1)))
            )
        page = await alice.list_tasks(ListTasksRequest(page_size=50, include_artifacts=True))
        log.append(list(page.tasks))


async def test_contexts_retries_scoping_lists_and_a_restart_read_the_same(
    apps: InProcessApps, tmp_path: Path
) -> None:
    twin = Twin(apps, tmp_path, auth=AUTH)
    logs: dict[bool, list[Any]] = {True: [], False: []}
    async with twin.running() as urls:
        for lean in (True, False):
            await story(urls, apps, lean, logs[lean])
    assert LEAN["served"] == 4, LEAN  # first, same context, Bob's first, Bob's admin_sum
    async with twin.running() as urls:  # both nodes restarted on their files
        for lean in (True, False):
            await after_restart(urls, apps, lean, logs[lean])
    on, off = Blank(), Blank()
    assert len(logs[True]) == len(logs[False])
    for step, (a, b) in enumerate(zip(logs[True], logs[False], strict=True)):
        assert on(a) == off(b), step


def test_the_switch_reads_the_card_unless_the_environment_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(LEAN_PATH_ENV, raising=False)
    assert lean_path_enabled(True) and not lean_path_enabled(False)
    monkeypatch.setenv(LEAN_PATH_ENV, "0")
    assert not lean_path_enabled(True)
    monkeypatch.setenv(LEAN_PATH_ENV, "on")
    assert lean_path_enabled(False)
    monkeypatch.setenv(LEAN_PATH_ENV, "maybe")
    with pytest.raises(ConfigError, match=LEAN_PATH_ENV):
        lean_path_enabled(True)


async def test_a_node_with_the_lean_path_off_never_takes_it(
    apps: InProcessApps, tmp_path: Path, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEAN_PATH_ENV, "0")
    card = parse_card(card_data(), env={})
    url = await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    task = await send(await make_client(http, url), skill_message("calculate", {"expression": "1"}))
    assert MessageToDict(task)["status"]["state"] == "TASK_STATE_COMPLETED"
    assert not LEAN


async def test_grpc_takes_the_lean_path_with_the_same_tasks(serve: Any, tmp_path: Path) -> None:
    """The gRPC binding reaches the same handler: same tasks, and the lean path serves it."""
    import grpc
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    answers: dict[bool, list[Any]] = {True: [], False: []}
    for lean in (True, False):
        card = parse_card(card_data(server={"lean_path": lean, "grpc_port": 0}), env={})
        url = await serve(
            lambda public_url, card=card, lean=lean: build_node_app(
                card, public_url=public_url, data_dir=tmp_path / str(lean), tools=TEST_TOOLS
            )
        )
        async with httpx.AsyncClient(timeout=5.0) as http:
            agent_card = await A2ACardResolver(http, url).get_agent_card()
        config = ClientConfig(
            streaming=False,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = ClientFactory(config).create(agent_card)
        try:
            for _, message, config_args, _ in CASES[:3]:
                answers[lean].append(await outcome(client, same_message(message)(), **config_args))
        finally:
            await client.close()
    assert LEAN["served"] == 3, LEAN
    on, off = Blank(), Blank()
    for step, (a, b) in enumerate(zip(answers[True], answers[False], strict=True)):
        assert on(a) == off(b), step
