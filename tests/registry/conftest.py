"""Fixtures for the registry tests (servers on loopback come from ``tests.servers``)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from node.registry import RegistrySettings, build_registry_app
from tests.servers import free_socket, running

LOOPBACK = ("127.0.0.0/8",)


@contextlib.asynccontextmanager
async def in_process(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and yield a client talking to it in-process."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://registry") as client:
            yield client


class FakeClock:
    """A clock the tests move by hand (seconds)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _agent_card(
    name: str,
    *,
    skills: list[dict[str, Any]] | None = None,
    agent_id: str | None = None,
    description: str = "",
    url: str = "http://127.0.0.1:1/",
) -> dict[str, Any]:
    """A valid A2A 1.0 agent card as JSON."""
    card: dict[str, Any] = {
        "name": name,
        "description": description or f"{name} does things",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills if skills is not None else [],
    }
    if agent_id is not None:
        card["capabilities"]["extensions"] = [
            {"uri": "urn:a2a-node:ext:skill-schemas:v1", "params": {"agent_id": agent_id}}
        ]
    return card


def _skill(skill_id: str, *tags: str, name: str = "", description: str = "") -> dict[str, Any]:
    return {
        "id": skill_id,
        "name": name or skill_id.title(),
        "description": description,
        "tags": list(tags),
    }


@dataclass
class CardServer:
    """Serves whatever documents the test puts at a path (JSON, raw bytes, any status)."""

    base_url: str = ""
    documents: dict[str, tuple[int, bytes]] = field(default_factory=dict)

    card = staticmethod(_agent_card)
    skill = staticmethod(_skill)

    def put_card(self, path: str, name: str, **card: Any) -> str:
        """Serve a valid card (see :func:`_agent_card`) at ``path``; return its URL."""
        return self.put(path, _agent_card(name, **card))

    def put(self, path: str, document: Any, *, status: int = 200) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.documents[path] = (status, body)
        return self.base_url + path

    def app(self) -> Starlette:
        async def serve(request: Request) -> Response:
            status, body = self.documents.get(request.url.path, (404, b"{}"))
            return Response(body, status_code=status, media_type="application/json")

        return Starlette(routes=[Route("/{path:path}", serve)])


@pytest.fixture
async def card_server() -> AsyncIterator[CardServer]:
    server = CardServer()
    sock = free_socket()
    async with running(server.app(), sock, lifespan="off") as url:
        server.base_url = url
        yield server


ServeApp = Callable[..., Awaitable[str]]


@pytest.fixture
async def serve_app() -> AsyncIterator[ServeApp]:
    """``url = await serve_app(lambda url: app)``: run the app with uvicorn until the test ends.

    The factory gets the base URL before the app is built (so a card can name its own URL).
    """
    async with contextlib.AsyncExitStack() as stack:

        async def start(factory: Callable[[str], ASGIApp], **kw: Any) -> str:
            sock = free_socket()
            app = factory(f"http://127.0.0.1:{sock.getsockname()[1]}")
            return await stack.enter_async_context(running(app, sock, **kw))

        yield start


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(tmp_path: Path) -> RegistrySettings:
    return RegistrySettings(db=str(tmp_path / "registry.db"), allow_cidrs=LOOPBACK, ttl_s=30)


MakeClient = Callable[..., contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def make_client(settings: RegistrySettings, clock: FakeClock) -> MakeClient:
    """``async with make_client(**overrides) as client``: a registry app in-process."""

    def make(**overrides: Any) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        merged = RegistrySettings(**{**settings.model_dump(), **overrides})
        return in_process(build_registry_app(merged, clock=clock))

    return make


@pytest.fixture
async def client(make_client: MakeClient) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c


# The PostgreSQL test runs only when scripts/test (or the caller) provides a server.
collect_ignore = [] if os.environ.get("A2A_NODE_TEST_PG_URL") else ["test_registry_postgres.py"]


@contextlib.asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """A new, empty PostgreSQL database for one test (dropped afterwards), so tests running at
    the same time never share the registry table. Without CREATE DATABASE rights, the given
    database itself, emptied first."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.ext.asyncio import create_async_engine

    from node.registry.store import async_url, metadata

    base = async_url(os.environ["A2A_NODE_TEST_PG_URL"])
    name = f"a2a_registry_test_{uuid4().hex[:12]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        try:
            async with admin.connect() as conn:
                await conn.execute(text(f'CREATE DATABASE "{name}"'))
        except DBAPIError:  # no CREATE DATABASE rights: share the given one
            async with admin.begin() as conn:
                await conn.run_sync(metadata.drop_all)
            yield base
            return
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """The registry's ``db`` setting, once per backend: a SQLite file, then a fresh PostgreSQL
    database (skipped when A2A_NODE_TEST_PG_URL is not set)."""
    if request.param == "sqlite":
        yield str(tmp_path / "registry.db")
        return
    if not os.environ.get("A2A_NODE_TEST_PG_URL"):
        pytest.skip("PostgreSQL tests need A2A_NODE_TEST_PG_URL")
    async with fresh_pg_database() as url:
        yield url
