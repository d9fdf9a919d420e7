"""The lean heartbeat route (:mod:`node.registry.heartbeat_route`) and the serving protocol's
shortcut (:mod:`node.registry.heartbeat_protocol`) answer exactly as the Starlette route they
stand in front of, and the ``known_agents`` setting bounds their cache.

The lean side is the registry as ``serve_registry`` serves it (``registry_server``: the
protocol, then the lean route); the reference is the same registry app without either (same
routes, middlewares and error handlers, sharing the running registry, uvicorn's own protocol),
both on loopback.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pydantic
import pytest
from starlette.applications import Starlette

from node.registry import RegistrySettings, build_registry_app
from node.registry.app import registry_server
from node.registry.heartbeat_route import HeartbeatRoute, heartbeat_id, iso_bytes
from node.registry.known import KnownAgents
from node.registry.records import iso, render_entry
from node.registry.service import Registry
from tests.registry.conftest import LOOPBACK, FakeClock
from tests.registry.test_registry_heartbeat_cache import statements
from tests.servers import free_socket, serving

TOKEN = "write-secret-123"
# the member the route cuts at, inside a description; quotes, non-ASCII and an emoji
TRICKY = 'says ,"healthy":true, and "quotes" \\ café ✓ 🚀'
Pair = tuple[httpx.AsyncClient, httpx.AsyncClient, Registry]


def without_lean_route(app: Starlette) -> Starlette:
    """The registry app as it was before the lean route (no lifespan: ``app``'s runs)."""
    return Starlette(
        routes=app.routes,
        middleware=[m for m in app.user_middleware if m.cls is not HeartbeatRoute],
        exception_handlers=app.exception_handlers,
    )


@pytest.fixture
def pair(serve_app, clock: FakeClock) -> Any:
    """``async with pair(db, **settings) as (lean, reference, registry)``: clients of one
    registry over real HTTP, through the lean route and without it."""

    @contextlib.asynccontextmanager
    async def make(db: str, **overrides: Any) -> AsyncIterator[Pair]:
        settings = RegistrySettings(db=db, allow_cidrs=LOOPBACK, **overrides)
        app = build_registry_app(settings, clock=clock)
        served = CountingApp(app)
        reference_url = await serve_app(lambda url: without_lean_route(app), lifespan="off")
        async with (
            as_registry_serves(app, served) as lean_url,
            httpx.AsyncClient(base_url=lean_url) as lean,
            httpx.AsyncClient(base_url=reference_url) as reference,
        ):
            lean.app_calls = served.calls  # type: ignore[attr-defined]
            yield lean, reference, app.state.registry

    return make


class CountingApp:
    """``app``, counting the HTTP requests that reach it (the protocol answers the others)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.calls: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


@contextlib.asynccontextmanager
async def as_registry_serves(app: Starlette, served: CountingApp) -> AsyncIterator[str]:
    """``app`` served by ``registry_server`` (as ``serve_registry`` does), the ASGI calls
    counted by ``served``; its base URL."""
    sock = free_socket()
    server = registry_server(app, "127.0.0.1", 0)
    server.config.app = served
    async with serving(server, sock) as url:
        yield url


def same(a: httpx.Response, b: httpx.Response) -> None:
    """The same status, body bytes and headers (but the date, which may tick between them)."""
    assert (a.status_code, a.content) == (b.status_code, b.content)
    assert [h for h in a.headers.raw if h[0] != b"date"] == [
        h for h in b.headers.raw if h[0] != b"date"
    ]


async def test_the_answer_is_the_routes_answer_byte_for_byte(db, pair, card_server, clock) -> None:
    async with pair(db) as (lean, reference, registry):
        skills = [
            card_server.skill("plan-trip", "travel", "été", description=TRICKY),
            card_server.skill("book", name='Book "it"'),
        ]
        url = card_server.put_card("/a.json", "Alpha ✓", description=TRICKY, skills=skills)
        assert (await lean.post("/v1/agents", json={"card_url": url})).status_code == 201
        for beat in range(3):  # a miss (the row is read), then hits (the kept answer)
            clock.advance(1.5)
            lean.app_calls.clear()
            answer = await lean.put("/v1/agents/alpha/heartbeat")
            # the miss through the app (the lean route), the hits by the protocol alone
            assert lean.app_calls == ([] if beat else ["PUT /v1/agents/alpha/heartbeat"])
            same(answer, await reference.put("/v1/agents/alpha/heartbeat"))
            assert answer.status_code == 200
            assert answer.headers["content-type"] == "application/json"
            assert registry.known.head("alpha") is not None  # answered by the lean route
            record = registry.known.get("alpha")
            assert record is not None and record.last_seen == clock.now
            expected = render_entry(
                record, healthy=True, expires_at=clock.now + 30, with_card=False
            )
            assert answer.content == expected
        assert answer.json()["description"] == TRICKY
        assert (await registry.counts()) == (1, 0)


async def test_errors_and_other_methods_are_answered_as_before(db, pair, card_server) -> None:
    async with pair(db, token=TOKEN, max_body_bytes=1024) as (lean, reference, _):
        url = card_server.put_card("/a.json", "Alpha")
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert (await lean.post("/v1/agents", json={"card_url": url}, headers=auth)).is_success
        cases: list[tuple[str, str, dict[str, str], int]] = [
            ("PUT", "/v1/agents/alpha/heartbeat", {}, 401),
            ("PUT", "/v1/agents/alpha/heartbeat", {"Authorization": "Basic eDp5"}, 401),
            ("PUT", "/v1/agents/alpha/heartbeat", {"Authorization": "Bearer nope"}, 403),
            ("PUT", "/v1/agents/alpha/heartbeat", {**auth, "Content-Length": "4096"}, 413),
            ("PUT", "/v1/agents/nobody/heartbeat", auth, 404),
            ("PUT", "/v1/agents/Not%20An%20Id!/heartbeat", auth, 400),
            ("PUT", "/v1/agents//heartbeat", auth, 404),
            ("PUT", "/v1/agents/a/b/heartbeat", auth, 404),
            ("GET", "/v1/agents/alpha/heartbeat", {}, 405),
            ("POST", "/v1/agents/alpha/heartbeat", auth, 405),
            ("PUT", "/v1/agents/alpha/heartbeat", auth, 200),
        ]
        for method, path, headers, status in cases:
            body = b"x" * 4096 if "Content-Length" in headers else None
            answer = await lean.request(method, path, headers=headers, content=body)
            assert answer.status_code == status, (method, path, answer.text)
            same(answer, await reference.request(method, path, headers=headers, content=body))
            if status == 401:
                assert answer.headers["www-authenticate"] == "Bearer"


async def test_what_the_protocol_declines_reaches_the_app_and_is_answered_the_same(
    db, pair, card_server
) -> None:
    """A heartbeat with a query, a body, ``Connection: close``, a wrong token, an unknown or
    evicted agent is left to uvicorn and the app (nothing done by the protocol first)."""
    async with pair(db, token=TOKEN) as (lean, reference, registry):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        url = card_server.put_card("/a.json", "Alpha")
        assert (await lean.post("/v1/agents", json={"card_url": url}, headers=auth)).is_success
        path = "/v1/agents/alpha/heartbeat"
        assert (await lean.put(path, headers=auth)).status_code == 200  # now remembered
        lean.app_calls.clear()
        assert (await lean.put(path, headers=auth)).status_code == 200
        assert lean.app_calls == []  # the shortcut
        cases: list[tuple[str, dict[str, str], bytes | None, int]] = [
            (path + "?x=1", auth, None, 200),
            (path, auth, b"{}", 200),
            (path, {**auth, "Connection": "close"}, None, 200),
            (path, {"Authorization": "Bearer nope"}, None, 403),
            (path, {}, None, 401),
            ("/v1/agents/nobody/heartbeat", auth, None, 404),
            ("/v1/agents/al%70ha/heartbeat", auth, None, 200),
        ]
        for where, headers, body, status in cases:
            lean.app_calls.clear()
            beats = len(registry.beats)
            answer = await lean.put(where, headers=headers, content=body)
            assert answer.status_code == status, (where, headers, answer.text)
            assert len(lean.app_calls) == 1, (where, headers)  # the app answered it
            if status != 200:
                assert len(registry.beats) == beats  # nothing queued by the protocol
            other = await reference.put(where, headers=headers, content=body)
            assert (answer.status_code, answer.json().keys()) == (
                other.status_code,
                other.json().keys(),
            )
            if status != 200:
                same(answer, other)


async def test_known_agents_bounds_the_entries_kept(db, pair, card_server) -> None:
    async with pair(db, known_agents=1) as (lean, _, registry):
        for name in ("Alpha", "Beta"):
            url = card_server.put_card(f"/{name}.json", name)
            assert (await lean.post("/v1/agents", json={"card_url": url})).status_code == 201
        with statements(registry) as sent:
            for agent_id in ("alpha", "beta", "alpha", "beta"):  # take turns: each one misses
                assert (await lean.put(f"/v1/agents/{agent_id}/heartbeat")).status_code == 200
        assert len([s for s in sent if s.lstrip().upper().startswith("SELECT")]) == 4
        assert len(registry.known) == 1
        with statements(registry) as sent:
            for _ in range(3):
                assert (await lean.put("/v1/agents/beta/heartbeat")).status_code == 200
        assert not [s for s in sent if s.lstrip().upper().startswith("SELECT")]


async def test_a_deletion_through_another_replica_is_404_over_http(db, pair, card_server) -> None:
    async with pair(db) as (a, _, registry), pair(db) as (b, _, _):
        url = card_server.put_card("/a.json", "Alpha")
        assert (await a.post("/v1/agents", json={"card_url": url})).status_code == 201
        assert (await b.put("/v1/agents/alpha/heartbeat")).status_code == 200
        assert (await a.put("/v1/agents/alpha/heartbeat")).status_code == 200
        assert (await b.delete("/v1/agents/alpha")).status_code == 204
        await registry.flush()  # a's UPDATE does not find the row: a forgets it
        answer = await a.put("/v1/agents/alpha/heartbeat")
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"


def test_the_setting_defaults_to_a_fleet_and_refuses_nonsense(tmp_path) -> None:
    settings = RegistrySettings(db=str(tmp_path / "r.db"))
    assert settings.known_agents == 100_000 == KnownAgents().size
    with pytest.raises(pydantic.ValidationError):
        RegistrySettings(db=str(tmp_path / "r.db"), known_agents=-1)


@pytest.mark.parametrize(
    ("path", "agent_id"),
    [
        ("/v1/agents/alpha/heartbeat", "alpha"),
        ("/v1/agents/x/heartbeat", "x"),
        ("/v1/agents//heartbeat", None),
        ("/v1/agents/heartbeat", None),
        ("/v1/agents/a/b/heartbeat", None),
        ("/v1/agents/alpha/heartbeat/", None),
        ("/v1/agents/alpha", None),
    ],
)
def test_heartbeat_paths(path: str, agent_id: str | None) -> None:
    assert heartbeat_id(path) == agent_id


def test_the_cli_refuses_a_negative_known_agents(tmp_path) -> None:
    from node.cli import main

    db = str(tmp_path / "r.db")
    assert main(["registry", "--db", db, "--known-agents", "-1"]) == 2


def test_the_answers_times_are_written_as_iso_writes_them() -> None:
    rng = random.Random(14)
    edges = [1.7e9, 1.7e9 + 0.9999995, 1.7e9 + 0.0000005, 1.7e9 + 0.0000015, 1.7e9 - 1e-7, 0.0]
    around = [1.7e9 + k / 1e6 + 0.5e-6 for k in range(-2000, 2000)]  # halves: to even
    times = edges + around + [rng.uniform(0, 4e9) for _ in range(20_000)]
    assert [iso_bytes(t) for t in times] == [iso(t).encode() for t in times]
