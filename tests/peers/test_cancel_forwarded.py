"""A canceled task cancels the work it forwarded to a peer.

Node B (a real node on loopback) has a tool ``hold`` that works until it is stopped. Coordinator
A lists B through a card document that keeps one of B's interfaces (so A's peer client speaks
that binding) and publishes ``b__hold``. A client sends ``b__hold`` to A, waits until B's tool
runs, and cancels A's task: B's task must end CANCELED and its tool be stopped at once, whether
A's blocking send was still waiting (A does not know B's task id: it finds it by the context id
it sent) or A's stream had already named the task (cancelled by id). A peer that hangs at cancel
time holds the caller's cancellation no longer than the grace; a peer refusing our context id
(A2A lets it) gets the message without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.types import (
    CancelTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from node.card import parse_card
from node.client import data_message, skill_message
from node.outbound_http import outbound_client
from node.peers import peer_client
from node.peers.peer_client import CANCEL_GRACE_S, PeerClient
from node.server import lean_path
from node.server.app import build_node_app
from node.tooling import ToolContext, tool
from node.tooling.tool import Tool
from tests.peers.peers_support import (
    PeerFactory,
    Recorder,
    eventually,
    one_interface,
    peer_app,
    peer_card,
)
from tests.server.conftest import make_client
from tests.servers import InProcessApps, free_socket, running, url_of

Serve = Callable[..., Awaitable[str]]
CANCELED, WORKING = TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_WORKING


@dataclass
class Held:
    """What B's ``hold`` tool did."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)


def hold_tool(held: Held) -> Tool:
    @tool(read_only=True, name="hold")
    async def hold(ctx: ToolContext) -> str:
        """Work until stopped (at most 25 s)."""
        held.started.set()
        try:
            await asyncio.sleep(25)
        except asyncio.CancelledError:
            held.stopped.set()
            raise
        return "held to the end"

    return hold


async def read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's body, and a ``receive`` that gives it again to the app downstream."""
    body, more = b"", True
    while more:
        message = await receive()
        body, more = body + message.get("body", b""), message.get("more_body", False)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


class Methods:
    """Passes requests through, noting each POST's JSON-RPC method and each request's path."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.seen = app, list[str]()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.seen.append(f"{scope['method']} {scope['path']}")
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, receive = await read_body(receive)
        with contextlib.suppress(ValueError, AttributeError):
            self.seen.append(str(json.loads(body).get("method")))
        await self.app(scope, receive, send)


@dataclass
class Setup:
    client: Client  # A's
    peer: Client  # B's
    held: Held
    methods: Methods


@contextlib.asynccontextmanager
async def forwarding(
    serve: Serve,
    apps: InProcessApps,
    tmp_path: Path,
    *,
    binding: str,
    streaming: bool,
    lean: bool,
) -> AsyncIterator[Setup]:
    """B served on loopback, A in-process reaching B through ``binding`` only."""
    held = Held()
    b_card = parse_card(
        {
            "id": "b",
            "name": "B",
            "description": "Holds.",
            "tools": [],
            "server": {"grpc_port": 0} if binding == "GRPC" else {},
        },
        env={},
    )
    methods: list[Methods] = []

    def b_app(url: str) -> ASGIApp:
        app = build_node_app(
            b_card, public_url=url, data_dir=tmp_path / "b", store="memory", tools=[hold_tool(held)]
        )
        methods.append(Methods(app))
        return methods[0]

    b = await serve(b_app)
    async with httpx.AsyncClient(timeout=5.0) as plain:
        document = (await plain.get(f"{b}/.well-known/agent-card.json")).json()
    only = one_interface(document, binding, "1.0")

    async def card(_: Request) -> JSONResponse:
        return JSONResponse(only)

    card_app = Starlette(routes=[Route("/b.json", card)])
    async with running(card_app, free_socket(), lifespan="off") as card_host:
        peers = {
            "static": [{"url": f"{card_host}/b.json", "expose": True}],
            "refresh_s": 60,
            "call_timeout_s": 20,
            "streaming": streaming,
        }
        a = await forwarder(apps, tmp_path, peers, lean=lean, skill="b__hold")
        async with apps.client() as http:
            yield Setup(await make_client(http, a), await make_client(http, b), held, methods[0])


async def forwarder(
    apps: InProcessApps, tmp_path: Path, peers: dict[str, Any], *, lean: bool, skill: str
) -> str:
    """A, in-process, forwarding to the static ``peers``; its URL once its card lists ``skill``."""
    card = parse_card(
        {
            "id": "a",
            "name": "A",
            "description": "Forwards to B.",
            "peers": peers,
            "server": {"lean_path": lean},
        },
        env={},
    )
    a = await apps.start(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path / "a", store="memory")
    )
    async with apps.client() as http:

        async def published() -> bool:
            served = (await http.get(f"{a}/.well-known/agent-card.json")).json()
            return skill in {s["id"] for s in served["skills"]}

        await eventually(published, within=10.0)
    return a


async def only_task(client: Client, state: TaskState) -> Task:
    """The one task ``client``'s node lists, once it is in ``state``."""
    found: list[Task] = []

    async def listed() -> bool:
        found[:] = (await client.list_tasks(ListTasksRequest(page_size=10))).tasks
        return len(found) == 1 and found[0].status.state == state

    await eventually(listed, within=10.0)
    return found[0]


async def blocking_send(client: Client) -> Task:
    request = SendMessageRequest(message=skill_message("b__hold", {}))
    events = [event async for event in client.send_message(request)]
    return events[-1].task


async def cancel_and_check(setup: Setup, named: asyncio.Event | None = None) -> list[str]:
    """Cancel A's task while B's tool runs: B's task ends CANCELED, its tool stopped, at once.

    What A sent B (:class:`Methods`) until B's tool stopped."""
    sending = asyncio.create_task(blocking_send(setup.client))
    await asyncio.wait_for(setup.held.started.wait(), 10)
    if named is not None:  # A's stream has read B's first event
        await asyncio.wait_for(named.wait(), 10)
    task = await only_task(setup.client, WORKING)
    start = time.monotonic()
    canceled = await setup.client.cancel_task(CancelTaskRequest(id=task.id))
    await asyncio.wait_for(setup.held.stopped.wait(), CANCEL_GRACE_S + 1)
    stopped_after = time.monotonic() - start
    sent_by_a = list(setup.methods.seen)
    assert canceled.status.state == CANCELED
    assert (await only_task(setup.peer, CANCELED)).status.state == CANCELED
    assert (await asyncio.wait_for(sending, 10)).status.state == CANCELED
    assert stopped_after < CANCEL_GRACE_S
    return sent_by_a


@pytest.mark.parametrize(
    ("binding", "lean"), [("JSONRPC", True), ("HTTP+JSON", False), ("GRPC", True)]
)
async def test_cancel_with_a_blocking_send_in_flight_cancels_the_peer_task(
    serve: Serve, apps: InProcessApps, tmp_path: Path, binding: str, lean: bool
) -> None:
    async with forwarding(
        serve, apps, tmp_path, binding=binding, streaming=False, lean=lean
    ) as setup:
        sent = await cancel_and_check(setup)
    # A knew no task id: it found B's task by the context id it sent, then cancelled it.
    if binding == "JSONRPC":
        assert sent.count("ListTasks") >= 1, sent
        assert sent.count("CancelTask") == 1, sent
    elif binding == "HTTP+JSON":
        assert "GET /rest/tasks" in sent, sent
        assert sum(s.endswith(":cancel") for s in sent) == 1, sent


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
async def test_cancel_after_the_stream_named_the_task_cancels_it_by_id(
    serve: Serve, apps: InProcessApps, tmp_path: Path, lean: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    named, fold = asyncio.Event(), peer_client._apply

    def noting(task: Task | None, event: StreamResponse) -> Task:
        folded = fold(task, event)
        if folded.id:
            named.set()
        return folded

    monkeypatch.setattr(peer_client, "_apply", noting)
    async with forwarding(serve, apps, tmp_path, binding="JSONRPC", streaming=True, lean=lean) as s:
        sent = await cancel_and_check(s, named)
    assert sent.count("SendStreamingMessage") == 1, sent
    assert sent.count("CancelTask") == 1, sent
    assert "ListTasks" not in sent, sent  # the stream had named it


@contextlib.asynccontextmanager
async def hanging_peer() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A peer that accepts connections and reads requests but never answers; what it read."""
    read: list[bytes] = []
    handlers: set[asyncio.Task[Any]] = set()

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while chunk := await reader.read(65536):
                read.append(chunk)
        writer.close()

    sock = free_socket()
    server = await asyncio.start_server(swallow, sock=sock)
    try:
        yield url_of(sock), read
    finally:
        server.close()
        for handler in handlers:
            handler.cancel()
        await server.wait_closed()


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "stream"])
async def test_a_hanging_peer_holds_the_cancellation_no_longer_than_the_grace(
    streaming: bool,
) -> None:
    grace = 0.3
    async with hanging_peer() as (url, read), outbound_client(timeout=5.0) as http:
        card = peer_card(url, streaming=streaming)
        client = PeerClient("b", card, http=http, streaming=streaming, cancel_grace_s=grace)
        message = skill_message("b__hold", {})
        call = asyncio.create_task(client.call(message, deadline=time.time() + 20))
        await eventually(
            lambda: b"SendStreamingMessage" in b"".join(read) or b"SendMessage" in b"".join(read)
        )
        start = time.monotonic()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        held = time.monotonic() - start
        sent = b"".join(read)
    assert grace * 0.9 <= held < grace + 0.5  # it tried for the whole grace, and no longer
    assert b"ListTasks" in sent  # the peer named no task: it was looked up (and never answered)
    send, lookup = sent.split(b"ListTasks", 1)
    context_id = re.search(rb'"contextId":"([0-9a-f]{32})"', send)
    assert context_id is not None and context_id[1] in lookup  # the context it was sent in
    assert not message.context_id  # the caller's message is left as it was


class RefuseContext:
    """A peer that refuses (JSON-RPC -32602, as A2A allows) a message carrying a contextId."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.refused = app, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, receive = await read_body(receive)
        request = json.loads(body)
        if request["params"].get("message", {}).get("contextId"):
            self.refused += 1
            error = {"code": -32602, "message": "contextId not accepted here"}
            answer = {"jsonrpc": "2.0", "id": request["id"], "error": error}
            await JSONResponse(answer)(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def test_a_peer_refusing_our_context_id_gets_the_message_without_one(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    wrapped: list[RefuseContext] = []

    def refusing(app: ASGIApp) -> ASGIApp:
        wrapped.append(RefuseContext(app))
        return wrapped[0]

    peer = await start_peer(wrap=refusing, streaming=False)
    client = PeerClient("b", peer.card, http=http, streaming=False)
    add = {"skill": "add", "arguments": {"a": 1, "b": 2}}
    assert await client.call(data_message(add), deadline=time.time() + 5) == {"sum": 3}
    assert wrapped[0].refused == 1  # ours was refused once, the same message went without it
    assert await client.call(data_message(add), deadline=time.time() + 5) == {"sum": 3}
    assert wrapped[0].refused == 1  # and later ones go without one


async def test_a_peer_task_not_stored_yet_is_looked_up_again_and_the_cancel_cascades(
    serve: Serve, apps: InProcessApps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A → B (lean path) → C (a plain a2a-sdk peer, ``slow``). B stores its task only once its
    call to C has run VISIBLE_AFTER_S (0.5 s here): A's cancel, sent as soon as C works, finds
    nothing at first, asks again, cancels B's task, and B's cancelled call cancels C's."""
    monkeypatch.setattr(lean_path, "VISIBLE_AFTER_S", 0.5)
    c_sock, c_log = free_socket(), Recorder()
    c_app = peer_app(peer_card(url_of(c_sock), agent_id="c", name="Peer C"), c_log)
    async with running(c_app, c_sock) as c_url:
        b_card = parse_card(
            {
                "id": "b",
                "name": "B",
                "description": "Forwards to C.",
                "peers": {"static": [{"url": c_url, "expose": True}], "call_timeout_s": 20},
                "server": {"lean_path": True},
            },
            env={},
        )
        watched: list[Methods] = []

        def b_app(url: str) -> ASGIApp:
            app = build_node_app(b_card, public_url=url, data_dir=tmp_path / "b", store="memory")
            watched.append(Methods(app))
            return watched[0]

        b_url = await serve(b_app)
        peers = {"static": [{"url": b_url, "expose": True}], "call_timeout_s": 20}
        # SDK path on A: its task is listed at once
        a = await forwarder(apps, tmp_path, peers, lean=False, skill="b__c__slow")
        async with apps.client() as http:
            client, b = await make_client(http, a), await make_client(http, b_url)
            request = SendMessageRequest(message=skill_message("b__c__slow", {}))
            sending = asyncio.create_task(anext(aiter(client.send_message(request))))
            await eventually(lambda: bool(c_log.metadata))  # C works; B stores nothing yet
            task = await only_task(client, WORKING)
            await client.cancel_task(CancelTaskRequest(id=task.id))
            await eventually(lambda: bool(c_log.cancels), within=CANCEL_GRACE_S)
            sent_to_b = list(watched[0].seen)
            assert (await only_task(b, CANCELED)).status.state == CANCELED
            await asyncio.wait_for(sending, 10)
    assert sent_to_b.count("ListTasks") >= 2, sent_to_b  # empty at first, then B's task
    assert sent_to_b.count("CancelTask") == 1, sent_to_b


async def test_a_second_cancel_leaves_the_peer_cancel_running_and_aclose_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    grace = 0.3
    caplog.set_level(logging.INFO, logger="node.peers.peer_client")
    async with hanging_peer() as (url, read), outbound_client(timeout=5.0) as http:
        client = PeerClient("b", peer_card(url, streaming=False), http=http, cancel_grace_s=grace)
        call = asyncio.create_task(
            client.call(skill_message("b__hold", {}), deadline=time.time() + 20)
        )
        await eventually(lambda: b"SendMessage" in b"".join(read))
        call.cancel()
        await eventually(lambda: b"ListTasks" in b"".join(read))  # the peer's task looked up
        call.cancel()  # again: the caller goes at once, the lookup goes on
        with pytest.raises(asyncio.CancelledError):
            await call
        assert "could not cancel" not in caplog.text
        await client.aclose()
        assert "peer b: could not cancel task of this call" in caplog.text  # ended at the grace
