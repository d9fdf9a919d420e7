"""Fixtures for the planner tests: one scripted model server per module, reset for each test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from node.server.serve import make_server
from tests.planning.planning_support import DIALECTS, Dialect, Model, ScriptedModel
from tests.servers import free_socket, wait_until_ready


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def model_server() -> AsyncIterator[Model]:
    scripted = ScriptedModel()
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = make_server(scripted.app(url), "127.0.0.1", 0)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await wait_until_ready(url)
    yield scripted, url
    scripted.release.set()
    server.should_exit = True
    await asyncio.wait_for(task, timeout=10)


@pytest_asyncio.fixture(loop_scope="module")
async def model(model_server: Model) -> AsyncIterator[Model]:
    """``(scripted, url)``: the module's scripted model, with an empty script and record."""
    scripted, url = model_server
    scripted.reset()
    yield scripted, url
    scripted.release.set()  # let a hanging response finish


@pytest_asyncio.fixture(loop_scope="module")
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        yield client


@pytest.fixture(params=DIALECTS, ids=lambda d: d.name)
def dialect(request: pytest.FixtureRequest) -> Dialect:
    return request.param  # type: ignore[no-any-return]
