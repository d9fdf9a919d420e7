"""Federation: registries on loopback (real uvicorn servers) complete each other's searches."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import fastjsonschema
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_part
from a2a.types import Message, Role, SendMessageRequest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from node.cli.network import _upstreams
from node.errors import ConfigError
from node.peers.directory import PeerDirectory
from node.peers.settings import PeersSettings, RegistryConnection
from node.peers.toolset import PeerToolset
from node.protocol import HOP
from node.registry import RegistrySettings, build_registry_app
from node.registry.federation import HOP_HEADER
from node.registry.settings import FederationSettings, Upstream
from node.tooling.context import ToolContext
from tests.peers.peers_support import Recorder, peer_app, peer_card
from tests.registry.conftest import LOOPBACK, CardServer
from tests.servers import free_socket, running, url_of


class Counting:
    """Counts the listings an app serves and keeps the hop header of each."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.hops: list[bytes | None] = []

    @property
    def listings(self) -> int:
        return len(self.hops)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/agents" and scope["method"] == "GET":
            headers = dict(scope["headers"])
            self.hops.append(headers.get(HOP_HEADER.lower().encode()))
        await self.app(scope, receive, send)


@dataclass
class Net:
    """Registries on loopback ports picked before any starts, so they can name each other."""

    stack: contextlib.AsyncExitStack
    tmp_path: Path
    cards: CardServer
    http: httpx.AsyncClient
    socks: dict[str, socket.socket] = field(default_factory=dict)
    counters: dict[str, Counting] = field(default_factory=dict)

    def url(self, name: str) -> str:
        if name not in self.socks:
            self.socks[name] = free_socket()
        return url_of(self.socks[name])

    async def start(
        self,
        name: str,
        *upstreams: str | Upstream,
        allow: tuple[str, ...] = LOOPBACK,
        registry: dict[str, Any] | None = None,
        **federation: Any,
    ) -> str:
        """Run registry ``name`` whose upstreams are the registries (or URLs) ``upstreams``."""
        ups = tuple(
            u if isinstance(u, Upstream) else Upstream(url=u if "://" in u else self.url(u))
            for u in upstreams
        )
        settings = RegistrySettings(
            db=str(self.tmp_path / f"{name}.db"),
            port=int(self.url(name).rsplit(":", 1)[1]),  # its card names where it listens
            allow_cidrs=allow,
            federation=FederationSettings(upstreams=ups, **federation),
            **(registry or {}),
        )
        self.url(name)
        self.counters[name] = Counting(build_registry_app(settings))
        return await self.stack.enter_async_context(running(self.counters[name], self.socks[name]))

    async def add(self, registry: str, agent_id: str, **card: Any) -> None:
        url = self.cards.put_card(f"/{agent_id}.json", agent_id.title(), agent_id=agent_id, **card)
        response = await self.http.post(f"{self.url(registry)}/v1/agents", json={"card_url": url})
        assert response.status_code in (200, 201), response.text

    async def list(self, registry: str, **params: Any) -> dict[str, Any]:
        response = await self.http.get(f"{self.url(registry)}/v1/agents", params=params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body


def ids(listing: dict[str, Any]) -> list[str]:
    return [a["id"] for a in listing["agents"]]


def sources(listing: dict[str, Any]) -> dict[str, str | None]:
    return {a["id"]: a.get("registry") for a in listing["agents"]}


@pytest.fixture
async def net(tmp_path: Path, card_server: CardServer) -> AsyncIterator[Net]:
    async with contextlib.AsyncExitStack() as stack, httpx.AsyncClient(timeout=10) as http:
        yield Net(stack, tmp_path, card_server, http)


async def test_a_short_local_listing_is_completed_by_the_upstream_marked_with_its_source(
    net: Net,
) -> None:
    await net.start("b")
    await net.start("a", "b")
    await net.add("a", "a1")
    await net.add("b", "b1")
    await net.add("b", "b2")
    listing = await net.list("a")
    assert ids(listing) == ["a1", "b1", "b2"]  # local first
    assert sources(listing) == {"a1": None, "b1": net.url("b"), "b2": net.url("b")}
    assert listing["federation"] == {
        "upstreams": [{"url": net.url("b"), "agents": 2, "cached": False, "error": None}],
        "not_forwarded": None,
    }
    assert "federation" not in await net.list("b")  # no upstreams: the listing is as it was
    document = (await net.http.get(f"{net.url('a')}/v1/openapi.json")).json()
    fastjsonschema.compile(
        {"$ref": "#/components/schemas/AgentList", "components": document["components"]}
    )(listing)


async def test_three_registries_in_a_chain_each_entry_marked_with_the_registry_holding_it(
    net: Net,
) -> None:
    await net.start("c")
    await net.start("b", "c")
    await net.start("a", "b")
    await net.add("b", "b1")
    await net.add("c", "c1")
    listing = await net.list("a")
    assert sources(listing) == {"b1": net.url("b"), "c1": net.url("c")}
    chain = json.loads(net.counters["c"].hops[-1])["chain"]
    assert len(chain) == 2  # a, then b


async def test_a_loop_between_two_registries_ends_without_duplicates(net: Net) -> None:
    await net.start("a", "b", timeout_s=10)
    await net.start("b", "a", timeout_s=10)
    await net.add("a", "a1")
    await net.add("b", "b1")
    started = time.monotonic()
    assert ids(await net.list("a")) == ["a1", "b1"]
    assert ids(await net.list("b")) == ["b1", "a1"]
    assert time.monotonic() - started < 5  # no waiting for a deadline (10 s)
    # a → b → a: the second visit finds itself in the chain and does not forward again (and
    # cached answers spare some of the second round)
    assert net.counters["a"].listings <= 3 and net.counters["b"].listings <= 3


async def test_an_agent_listed_here_and_upstream_appears_once_as_the_local_entry(
    net: Net,
) -> None:
    await net.start("b")
    await net.start("a", "b")
    await net.add("a", "shared")
    await net.add("b", "shared")  # the same card URL, registered in both
    await net.add("b", "b1")
    assert sources(await net.list("a")) == {"shared": None, "b1": net.url("b")}


async def test_an_upstream_that_is_down_costs_local_results_nothing(net: Net) -> None:
    dead = free_socket()  # bound, not listening: connections are refused
    await net.start("b")
    await net.start("a", url_of(dead), "b", timeout_s=10)
    await net.add("a", "a1")
    await net.add("b", "b1")
    started = time.monotonic()
    listing = await net.list("a")
    assert time.monotonic() - started < 5  # no waiting for the deadline (10 s)
    assert ids(listing) == ["a1", "b1"]
    down, up = listing["federation"]["upstreams"]
    assert down["url"] == url_of(dead) and down["agents"] == 0
    assert "failed" in down["error"] and len(down["error"]) <= 200
    assert up["error"] is None
    again = await net.list("a")  # the failure is cached too: no new connection attempt
    assert again["federation"]["upstreams"][0]["cached"] is True
    dead.close()


async def test_a_failing_upstream_is_logged_once_not_once_per_query(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    dead = free_socket()
    await net.start("a", url_of(dead))
    with caplog.at_level(logging.WARNING, logger="node.registry.federation"):
        for text in ("one", "two", "three"):
            assert "failed" in (await net.list("a", q=text))["federation"]["upstreams"][0]["error"]
    warnings = [r for r in caplog.records if r.name == "node.registry.federation"]
    assert len(warnings) == 1 and url_of(dead) in warnings[0].getMessage()
    dead.close()


async def test_upstream_answers_are_cached_briefly(net: Net) -> None:
    await net.start("b")
    await net.start("a", "b", cache_s=2.0)  # room for two listings on a loaded machine
    await net.add("b", "b1")
    first, second = await net.list("a"), await net.list("a")
    assert ids(first) == ids(second) == ["b1"]
    assert second["federation"]["upstreams"][0]["cached"] is True
    assert net.counters["b"].listings == 1
    await net.add("b", "b2")
    deadline = time.monotonic() + 10
    while ids(await net.list("a")) != ["b1", "b2"]:  # after cache_s, b is asked again
        assert time.monotonic() < deadline, "the cached answer never expired"
        await asyncio.sleep(0.05)
    assert net.counters["b"].listings == 2


async def test_concurrent_misses_share_one_upstream_request(net: Net) -> None:
    await net.start("b")
    await net.start("a", "b")
    await net.add("b", "b1")
    listings = await asyncio.gather(*(net.list("a") for _ in range(5)))
    assert all(ids(listing) == ["b1"] for listing in listings)
    assert net.counters["b"].listings == 1


async def test_each_upstream_gives_at_most_max_results_entries(net: Net) -> None:
    await net.start("b")
    await net.start("a", "b", max_results=2)
    for n in (1, 2, 3):
        await net.add("b", f"b{n}")
    listing = await net.list("a")
    assert ids(listing) == ["b1", "b2"]
    assert listing["federation"]["upstreams"][0]["agents"] == 2


async def test_an_upstream_is_read_page_by_page_until_a_page_brings_nothing(net: Net) -> None:
    pages = {None: (["x1"], "p2"), "p2": (["x2"], "p3"), "p3": ([], "p4"), "p4": (["x4"], None)}
    asked: list[str | None] = []

    async def listing(request: Request) -> Response:
        token = request.query_params.get("page_token")
        asked.append(token)
        agents, next_token = pages[token]
        entries = [
            {"id": i, "card_url": f"http://127.0.0.1:9/{i}.json", "skills": []} for i in agents
        ]
        return JSONResponse({"agents": entries, "next_page_token": next_token})

    stub = await net.stack.enter_async_context(
        running(Starlette(routes=[Route("/v1/agents", listing)]), free_socket(), lifespan="off")
    )
    await net.start("a", stub)
    assert ids(await net.list("a")) == ["x1", "x2"]
    assert asked == [None, "p2", "p3"]


async def test_the_hop_limit_stops_forwarding(net: Net) -> None:
    await net.start("c")
    await net.start("b", "c")
    await net.start("a", "b", max_hops=1)
    await net.add("b", "b1")
    await net.add("c", "c1")
    listing = await net.list("a")
    assert ids(listing) == ["b1"]  # b, at the limit, answers with its own agents only
    assert net.counters["c"].listings == 0
    # a caller may lower a registry's limit, never raise it
    await net.start("d", "b", max_hops=3)
    hop = json.dumps({"chain": [], "max_hops": 1})
    response = await net.http.get(f"{net.url('d')}/v1/agents", headers={HOP_HEADER: hop})
    assert ids(response.json()) == ["b1"]
    assert ids(await net.list("d")) == ["b1", "c1"]


async def test_the_deadline_bounds_the_wait_for_a_slow_upstream(net: Net) -> None:
    release = asyncio.Event()
    seen: list[dict[str, Any]] = []

    async def hang(request: Request) -> Response:
        seen.append(json.loads(request.headers[HOP_HEADER]))
        await release.wait()
        return JSONResponse({"agents": [], "next_page_token": None})

    slow_sock = free_socket()
    slow = await net.stack.enter_async_context(
        running(Starlette(routes=[Route("/v1/agents", hang)]), slow_sock, lifespan="off")
    )
    net.stack.callback(release.set)  # runs before the slow server stops
    await net.start("b")
    await net.start("a", slow, "b", timeout_s=0.5)
    await net.add("a", "a1")
    await net.add("b", "b1")
    started = time.time()
    listing = await net.list("a")
    elapsed = time.time() - started
    assert 0.4 < elapsed < 3
    assert ids(listing) == ["a1", "b1"]
    assert "no complete answer within 0.50 s" in listing["federation"]["upstreams"][0]["error"]
    # the upstream was given less time than a waits (a stops waiting 0.5 s after it received the
    # call, which is after ``started``), so the upstream's deadline is passed when a answers
    assert started < seen[0]["deadline"] <= started + elapsed
    # a caller whose deadline has passed gets the local answer at once
    hop = json.dumps({"chain": ["x"], "max_hops": 3, "deadline": time.time() - 1})
    response = await net.http.get(f"{net.url('a')}/v1/agents", headers={HOP_HEADER: hop})
    assert ids(response.json()) == ["a1"]
    assert "deadline passed" in response.json()["federation"]["not_forwarded"]


async def test_the_tail_pages_on_with_federation_tokens(net: Net) -> None:
    await net.start("b")
    await net.start("a", "b")
    await net.add("a", "a1")
    for n in (1, 2, 3):
        await net.add("b", f"b{n}")
    first = await net.list("a", page_size=2)
    assert ids(first) == ["a1", "b1"] and first["next_page_token"] == "fed.1"
    second = await net.list("a", page_size=2, page_token=first["next_page_token"])
    assert ids(second) == ["b2", "b3"] and second["next_page_token"] is None


async def test_scope_local_stays_home_and_scope_federated_goes_out_on_a_full_page(
    net: Net,
) -> None:
    await net.start("b")
    await net.start("a", "b")
    await net.add("a", "a1")
    await net.add("b", "b1")
    local = await net.list("a", scope="local")
    assert ids(local) == ["a1"] and "federation" not in local
    full = await net.list("a", page_size=1)  # satisfied locally: not forwarded
    assert ids(full) == ["a1"] and full["next_page_token"] is None
    asked = await net.list("a", page_size=1, scope="federated")
    assert ids(asked) == ["a1"] and asked["next_page_token"] == "fed.0"
    rest = await net.list("a", page_size=1, scope="federated", page_token="fed.0")
    assert ids(rest) == ["b1"]
    assert net.counters["b"].listings == 1


@pytest.mark.parametrize(
    ("params", "headers", "message"),
    [
        ({"scope": "everywhere"}, {}, "scope must be one of"),
        ({"page_token": "fed.x"}, {}, "fed.<offset>"),
        ({}, {HOP_HEADER: "{not json"}, HOP_HEADER),
        ({}, {HOP_HEADER: '{"chain": "a"}'}, "chain"),
    ],
)
async def test_bad_federation_input_is_a_400(
    net: Net, params: dict[str, str], headers: dict[str, str], message: str
) -> None:
    await net.start("b")
    await net.start("a", "b")
    response = await net.http.get(f"{net.url('a')}/v1/agents", params=params, headers=headers)
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


async def test_upstreams_go_through_the_ssrf_guard(net: Net) -> None:
    await net.start("b")
    await net.start("a", "b", allow=())  # loopback not allowed: the upstream is refused
    await net.add("b", "b1")
    listing = await net.list("a")
    assert listing["agents"] == []
    assert "refused" in listing["federation"]["upstreams"][0]["error"]
    assert net.counters["b"].listings == 0


async def test_an_upstream_token_is_sent_to_that_upstream_and_never_logged(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "upstream-read-secret"
    guarded = {"read_token": SecretStr(secret), "read_token_required": True}
    await net.start("b", registry=guarded)
    await net.start("c", registry=guarded)
    good = Upstream(url=net.url("b"), token=SecretStr(secret))
    await net.start("a", good, "c")  # c is asked without the token
    b1 = net.cards.put_card("/b1.json", "B1", agent_id="b1")
    auth = {"Authorization": f"Bearer {secret}"}
    await net.http.post(f"{net.url('b')}/v1/agents", json={"card_url": b1}, headers=auth)
    with caplog.at_level(logging.DEBUG):
        listing = await net.list("a")
    assert ids(listing) == ["b1"]
    assert listing["federation"]["upstreams"][1]["error"] == f"HTTP 401 from {net.url('c')}"
    assert secret not in caplog.text and secret not in json.dumps(listing)


async def test_a_node_sees_the_agents_of_an_upstream_through_its_one_registry(
    net: Net,
) -> None:
    peer_sock = free_socket()
    card = peer_card(url_of(peer_sock), agent_id="far", name="Far Peer")
    far = await net.stack.enter_async_context(running(peer_app(card, Recorder()), peer_sock))
    await net.start("upstream")
    await net.start("home", "upstream")
    register = {"card_url": f"{far}/.well-known/agent-card.json"}
    assert (await net.http.post(f"{net.url('upstream')}/v1/agents", json=register)).is_success
    tools = PeerToolset()
    settings = PeersSettings(registry=RegistryConnection(url=net.url("home")))
    peers = PeerDirectory(net.http, settings, self_id="me", toolset=tools)
    await peers.refresh()
    assert [(p.id, p.source) for p in peers.peers()] == [("far", "registry")]
    call = tools.prepare_call("far__add", '{"a": 2, "b": 3}')
    assert await call.tool.execute(call.arguments, ToolContext()) == {"sum": 5}
    await peers.aclose()


def test_the_cli_reads_each_upstream_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UP_TOKEN", "s3cret")
    plain, guarded = _upstreams(["http://r1.example/", "https://r2.example#UP_TOKEN"])
    assert (plain.url, plain.token) == ("http://r1.example", None)
    assert guarded.url == "https://r2.example" and guarded.token is not None
    assert guarded.token.get_secret_value() == "s3cret" and "s3cret" not in repr(guarded)
    with pytest.raises(ConfigError, match="UNSET_TOKEN"):
        _upstreams(["https://r3.example#UNSET_TOKEN"])


async def find_agents(
    net: Net, registry: str, metadata: dict[str, Any] | None = None, **arguments: Any
) -> dict[str, Any]:
    """``find_agents`` through the official A2A client; the one data part of its answer."""
    card = await A2ACardResolver(net.http, net.url(registry)).get_agent_card()
    config = ClientConfig(
        streaming=False, httpx_client=net.http, supported_protocol_bindings=["JSONRPC"]
    )
    client = ClientFactory(config).create(card)
    request = {"skill": "find_agents", "arguments": arguments}
    message = Message(role=Role.ROLE_USER, parts=[new_data_part(request)], message_id=uuid4().hex)
    if metadata is not None:
        message.metadata.update(metadata)
    try:
        events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    finally:
        await client.close()
    assert [e.WhichOneof("payload") for e in events] == ["message"]
    (data,) = get_data_parts(events[0].message.parts)
    assert isinstance(data, dict)
    return data


async def test_find_agents_federates_as_the_listing_does(net: Net) -> None:
    await net.start("c")
    await net.start("b", "c")
    await net.start("a", "b")
    await net.add("a", "a1", skills=[net.cards.skill("add", "math")])
    await net.add("b", "b1", skills=[net.cards.skill("add", "math")])
    await net.add("c", "c1", skills=[net.cards.skill("add", "math")])
    await net.add("c", "c2", skills=[net.cards.skill("translate", "language")])
    found = await find_agents(net, "a", tag="math")
    assert [(x["id"], x.get("registry")) for x in found["agents"]] == [
        ("a1", None),
        ("b1", net.url("b")),
        ("c1", net.url("c")),
    ]
    assert set(found["agents"][1]) == {"id", "name", "card_url", "skills", "healthy", "registry"}
    assert found["federation"]["upstreams"][0]["error"] is None
    assert [
        x["id"] for x in (await find_agents(net, "a", tag="math", scope="local"))["agents"]
    ] == ["a1"]
    # a full local page federates only when asked; the tail then pages on with fed.<n> tokens
    first = await find_agents(net, "a", tag="math", limit=1, scope="federated")
    assert [x["id"] for x in first["agents"]] == ["a1"]
    assert first["next_page_token"] == "fed.0"
    second = await find_agents(
        net, "a", tag="math", limit=1, scope="federated", page_token=first["next_page_token"]
    )
    assert [x["id"] for x in second["agents"]] == ["b1"]


async def test_find_agents_keeps_the_hop_rules(net: Net) -> None:
    await net.start("a", "b", timeout_s=10)
    await net.start("b", "a", timeout_s=10)
    await net.add("a", "a1")
    await net.add("b", "b1")
    found = await find_agents(net, "a")  # a loop: a → b → a ends, each agent once
    assert [x["id"] for x in found["agents"]] == ["a1", "b1"]
    # the hop state of a forwarded message bounds the forwarding (here: no hop left)
    spent = {HOP: {"chain": ["x"], "max_hops": 1}}
    found = await find_agents(net, "a", metadata=spent)
    assert [x["id"] for x in found["agents"]] == ["a1"]
    assert "hop" in found["federation"]["not_forwarded"]
    assert net.counters["b"].listings <= 2


@pytest.mark.parametrize(
    "arguments", [{"scope": "everywhere"}, {"page_token": "fed.x"}, {"scope": 3}]
)
async def test_find_agents_refuses_bad_federation_arguments(
    net: Net, arguments: dict[str, Any]
) -> None:
    await net.start("b")
    await net.start("a", "b")
    found = await find_agents(net, "a", **arguments)
    assert found["error"]["code"] == "bad_request" and found["error"]["message"]
