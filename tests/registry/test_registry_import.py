"""Filling the registry: ``POST /v1/agents:import`` and ``a2a-node registry import``, conditional
re-registration (no parse when the card did not change), and the fetch slots (per host, global).

A real card server on loopback serves cards with or without an ETag, answers ``If-None-Match``
with 304, and can hold requests open to fill the registry's fetch slots.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from node.registry import RegistrySettings, build_registry_app, bulk
from tests.registry.conftest import FakeClock, MakeClient, _agent_card, in_process
from tests.servers import free_socket, running

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Cards:
    """Cards at ``/e/{name}`` (with an ETag), ``/p/{name}`` (without), ``/hold/{name}`` (held
    until :attr:`release` is set); counts requests, conditional ones and 304s."""

    base_url: str = ""
    versions: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    conditional: int = 0
    not_modified: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, kind: str, name: str) -> str:
        return f"{self.base_url}/{kind}/{name}"

    def card(self, name: str) -> bytes:
        version = self.versions.get(name, 1)
        card = _agent_card(f"Agent {name}", description=f"{name} v{version}")
        return json.dumps(card).encode()

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            kind, name = request.path_params["kind"], request.path_params["name"]
            self.requests += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                if kind == "hold":
                    await self.release.wait()
                etag = f'"{name}-{self.versions.get(name, 1)}"'
                if "if-none-match" in request.headers:
                    self.conditional += 1
                    if kind == "e" and request.headers["if-none-match"] == etag:
                        self.not_modified += 1
                        return Response(status_code=304, headers={"ETag": etag})
                headers = {"ETag": etag} if kind == "e" else {}
                return Response(self.card(name), media_type="application/json", headers=headers)
            finally:
                self.in_flight -= 1

        return Starlette(routes=[Route("/{kind}/{name}", serve)])


@pytest.fixture
async def cards() -> AsyncIterator[Cards]:
    server = Cards()
    async with running(server.app(), free_socket(), lifespan="off") as url:
        server.base_url = url
        yield server
        server.release.set()


async def _import(client: httpx.AsyncClient, urls: list[Any]) -> dict[str, Any]:
    response = await client.post("/v1/agents:import", json={"card_urls": urls})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def _ids(client: httpx.AsyncClient) -> set[str]:
    return {a["id"] for a in (await client.get("/v1/agents?page_size=200")).json()["agents"]}


async def test_import_registers_good_urls_and_names_each_bad_one(
    client: httpx.AsyncClient, cards: Cards
) -> None:
    good = [cards.url("e", f"a{i}") for i in range(5)] + [cards.url("p", "b0")]
    bad = [
        "ftp://127.0.0.1/card.json",
        123,
        "",
        "http://10.255.255.1/card.json",  # private: refused by the SSRF guard, never fetched
        cards.base_url + "/missing",  # 404
    ]
    body = await _import(client, [*good[:3], *bad, *good[3:], good[0]])  # good[0] twice
    results = body["results"]
    assert [r["card_url"] for r in results] == [*good[:3], *bad, *good[3:], good[0]]
    assert (body["registered"], body["unchanged"], body["errors"]) == (7, 0, 5)
    codes = [r["error"]["code"] for r in results if r["status"] == "error"]
    assert codes == ["invalid_url", "invalid_url", "invalid_url", "url_refused", "card_unreachable"]
    assert all(r["error"]["message"] for r in results if r["status"] == "error")
    assert await _ids(client) == {
        "agent-a0",
        "agent-a1",
        "agent-a2",
        "agent-a3",
        "agent-a4",
        "agent-b0",
    }
    entry = (await client.get("/v1/agents/agent-a0")).json()
    assert entry["card_url"] == good[0] and entry["card"]["description"] == "a0 v1"


async def test_import_refuses_bad_batches_whole(make_client: MakeClient, cards: Cards) -> None:
    async with make_client(import_max_urls=3, token="write-token-1") as client:
        auth = {"Authorization": "Bearer write-token-1"}
        url = cards.url("e", "x")
        unauthenticated = await client.post("/v1/agents:import", json={"card_urls": [url]})
        assert unauthenticated.status_code == 401
        for body, message in [
            ({"card_urls": [url] * 4}, "at most 3"),
            ({"card_urls": []}, "non-empty list"),
            ({"card_urls": url}, "non-empty list"),
            ({"urls": [url]}, "card_urls"),
        ]:
            response = await client.post("/v1/agents:import", json=body, headers=auth)
            assert response.status_code == 400, response.text
            assert message in response.json()["error"]["message"]
        assert cards.requests == 0
        assert (await client.get("/v1/agents")).json()["agents"] == []


async def test_unchanged_card_is_revalidated_not_parsed(
    client: httpx.AsyncClient, cards: Cards, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[bytes] = []
    real = bulk.card_from_body
    monkeypatch.setattr(bulk, "card_from_body", lambda body: parsed.append(body) or real(body))
    with_etag, without = cards.url("e", "s"), cards.url("p", "t")
    for url in (with_etag, without):
        assert (await client.post("/v1/agents", json={"card_url": url})).status_code == 201
    assert len(parsed) == 2 and cards.conditional == 0

    # Registered again, unchanged: a 304 to If-None-Match, or the same sha256 of the body.
    for url in (with_etag, without):
        response = await client.post("/v1/agents", json={"card_url": url})
        assert response.status_code == 200, response.text
    assert (cards.conditional, cards.not_modified) == (1, 1)
    assert len(parsed) == 2
    body = await _import(client, [with_etag, without])
    assert [r["status"] for r in body["results"]] == ["unchanged", "unchanged"]
    assert (cards.conditional, cards.not_modified, len(parsed)) == (2, 2, 2)

    # Changed: parsed and stored again.
    cards.versions.update(s=2, t=2)
    body = await _import(client, [with_etag, without])
    assert [r["status"] for r in body["results"]] == ["registered", "registered"]
    assert len(parsed) == 4
    for agent_id, description in (("agent-s", "s v2"), ("agent-t", "t v2")):
        assert (await client.get(f"/v1/agents/{agent_id}")).json()["card"]["description"] == (
            description
        )
    response = await client.post("/v1/agents", json={"card_url": with_etag})
    assert response.status_code == 200 and len(parsed) == 4 and cards.not_modified == 3


async def test_a_card_moving_to_an_id_held_elsewhere_is_a_conflict_entry(
    client: httpx.AsyncClient, cards: Cards
) -> None:
    first, second = cards.url("e", "same"), cards.url("p", "same")  # one name, so one id
    body = await _import(client, [first, second])
    assert [r["status"] for r in body["results"]] == ["registered", "error"]
    assert body["results"][1]["error"]["code"] == "conflict"
    assert (await client.get("/v1/agents/agent-same")).json()["card_url"] == first


async def test_per_host_slots_bound_fetches_and_answer_429(
    make_client: MakeClient, cards: Cards, serve_app: Any
) -> None:
    other = Cards()
    other.base_url = await serve_app(lambda url: other.app(), lifespan="off")
    async with make_client(fetch_per_host=2, fetch_concurrency=3, fetch_queue_s=0.3) as client:
        held = [
            asyncio.create_task(client.post("/v1/agents", json={"card_url": cards.url("hold", n)}))
            for n in ("h1", "h2")
        ]
        while cards.in_flight < 2:
            await asyncio.sleep(0.01)
        refused = await client.post("/v1/agents", json={"card_url": cards.url("e", "h3")})
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "host_busy"
        assert refused.headers["retry-after"] == "1"
        # Another host still has slots: one global slot is left.
        ok = await client.post("/v1/agents", json={"card_url": other.url("e", "o1")})
        assert ok.status_code == 201, ok.text
        # With the third global slot taken as well, every host waits, then 503.
        third = asyncio.create_task(
            client.post("/v1/agents", json={"card_url": other.url("hold", "o2")})
        )
        while other.in_flight < 1:
            await asyncio.sleep(0.01)
        busy = await client.post("/v1/agents", json={"card_url": other.url("e", "o3")})
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "busy"
        assert busy.headers["retry-after"] == "1"
        cards.release.set()
        other.release.set()
        assert [r.status_code for r in await asyncio.gather(*held, third)] == [201, 201, 201]
        assert cards.most_in_flight == 2


async def test_an_import_keeps_to_the_per_host_limit(make_client: MakeClient, cards: Cards) -> None:
    async with make_client(fetch_per_host=3, fetch_concurrency=8) as client:
        urls = [cards.url("hold", f"m{i}") for i in range(10)]
        task = asyncio.create_task(_import(client, urls))
        while cards.in_flight < 3:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # a fourth fetch would have started by now
        assert cards.in_flight == 3
        cards.release.set()
        assert (await task)["registered"] == 10
        assert cards.most_in_flight == 3


async def test_cli_import_reports_bad_lines_and_registers_the_rest(
    settings: RegistrySettings, cards: Cards, tmp_path: Path
) -> None:
    app = build_registry_app(
        RegistrySettings(**{**settings.model_dump(), "token": "cli-write-token"})
    )
    async with running(app, free_socket()) as registry_url:
        good = [cards.url("e", f"c{i}") for i in range(25)]
        text = "# cards\n" + "\n".join(good[:20]) + "\nnot a url\n\n" + "\n".join(good[20:]) + "\n"
        path = tmp_path / "cards.txt"
        path.write_text(text)
        env = {**os.environ, "A2A_NODE_REGISTRY_TOKEN": "cli-write-token"}
        command = [sys.executable, "-m", "node.cli", "registry", "import", str(path)]
        command += ["--registry", registry_url, "--batch", "7"]
        process = await asyncio.create_subprocess_exec(
            *command,
            env=env,
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 3, (out, err)
        assert f"{path}:22: not a url: invalid_url:" in err.decode()
        assert "26 card URLs: 25 registered, 0 unchanged, 1 failed" in out.decode()
        async with httpx.AsyncClient(base_url=registry_url) as http:
            listed = (await http.get("/v1/agents?page_size=200")).json()["agents"]
        assert len(listed) == 25

        # Again from standard input: all unchanged, exit 0.
        process = await asyncio.create_subprocess_exec(
            *command[:-5], "-", "--registry", registry_url, env=env, cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate("\n".join(good).encode()), 60)
        assert process.returncode == 0, (out, err)
        assert "25 card URLs: 0 registered, 25 unchanged, 0 failed" in out.decode()


async def test_concurrent_registrations_are_written_together(
    settings: RegistrySettings, cards: Cards
) -> None:
    app = build_registry_app(RegistrySettings(**{**settings.model_dump(), "fetch_per_host": 40}))
    async with in_process(app) as client:
        registry = app.state.registry
        before = registry.write_transactions
        posts = [
            asyncio.create_task(
                client.post("/v1/agents", json={"card_url": cards.url("hold", f"g{i}")})
            )
            for i in range(30)
        ]
        while cards.in_flight < 30:  # every fetch open, then all answered at once
            await asyncio.sleep(0.01)
        cards.release.set()
        assert [r.status_code for r in await asyncio.gather(*posts)] == [201] * 30
        assert registry.write_transactions - before <= 10  # group commit, not one each
        assert len(await _ids(client)) == 30


async def test_imported_agents_follow_ttl_and_eviction(
    client: httpx.AsyncClient, cards: Cards, clock: FakeClock
) -> None:
    urls = [cards.url("e", "t1"), cards.url("p", "t2")]
    assert (await _import(client, urls))["registered"] == 2
    clock.advance(31)  # past the TTL (30 s): listed as unhealthy
    listed = (await client.get("/v1/agents?healthy=false")).json()["agents"]
    assert {a["id"] for a in listed} == {"agent-t1", "agent-t2"}
    # Imported again, unchanged: a heartbeat, healthy again.
    assert (await _import(client, urls))["unchanged"] == 2
    for agent_id in ("agent-t1", "agent-t2"):
        assert (await client.get(f"/v1/agents/{agent_id}")).json()["healthy"] is True
    clock.advance(91)  # past evict_after (3 * TTL): gone
    await client.get("/v1/agents")  # a read sweeps when the sweep interval has passed
    assert (await client.get("/v1/agents/agent-t1")).status_code == 404
    assert await _ids(client) == set()
    body = await _import(client, urls)  # registered anew, fetched whole (no stale validator)
    assert body["registered"] == 2 and await _ids(client) == {"agent-t1", "agent-t2"}


async def test_a_card_is_stored_as_its_fetched_text_and_read_back_the_same(
    make_client: MakeClient, settings: RegistrySettings, serve_app: Any
) -> None:
    cards = {
        name: json.dumps(
            {**_agent_card(f"Agent {name}"), "description": "crème brûlée — ünïcode ✓"},
            indent=2,
            ensure_ascii=False,
        ).encode()
        for name in ("api", "bulk")
    }

    async def serve(request: Request) -> Response:
        return Response(cards[request.path_params["name"]], media_type="application/json")

    base = await serve_app(lambda url: Starlette(routes=[Route("/{name}", serve)]))
    async with make_client() as client:
        response = await client.post("/v1/agents", json={"card_url": f"{base}/api"})
        assert response.status_code == 201, response.text
        assert (await _import(client, [f"{base}/bulk"]))["registered"] == 1
        for name in cards:
            got = (await client.get(f"/v1/agents/agent-{name}")).json()["card"]
            assert got == json.loads(cards[name])
    with sqlite3.connect(settings.db) as db:
        stored = dict(db.execute("SELECT id, card FROM registry_agents"))
    assert stored == {f"agent-{name}": body.decode() for name, body in cards.items()}
