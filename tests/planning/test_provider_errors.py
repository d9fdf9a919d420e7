"""Provider failures become PlanningError (ProviderError) with a cause, bounded, without the key."""

from __future__ import annotations

import httpx
import pytest

from node.errors import PlanningError
from node.planning.llm import LLMPlanner
from node.planning.providers import ProviderError
from node.tooling import Toolbox, ToolContext, ToolRunner
from tests.planning.planning_support import HANG, KEY, KEY_ENV, Dialect, Model, Raw
from tests.servers import free_socket

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


async def failure(
    dialect: Dialect, url: str, http: httpx.AsyncClient, **settings: object
) -> ProviderError:
    registry = Toolbox()
    planner = LLMPlanner.from_settings(dialect.settings(url, api_key_env=KEY_ENV, **settings), http)
    with pytest.raises(ProviderError) as caught:
        await planner.run("hi", registry, ToolRunner(registry), ToolContext())
    assert isinstance(caught.value, PlanningError)
    assert KEY not in str(caught.value)
    return caught.value


async def test_server_error_status(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, url = model
    echo = f'{{"error": {{"message": "bad key {KEY} ' + "x" * 5000 + '"}}'
    scripted.then(Raw(500, echo))
    error = await failure(dialect, url, http)
    assert str(error).startswith("the model endpoint answered 500: bad key ***")
    assert len(str(error)) < 400


async def test_unauthorised_plain_text(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, url = model
    scripted.then(Raw(401, "no such key", "text/plain"))
    error = await failure(dialect, url, http)
    assert str(error) == "the model endpoint answered 401: no such key"


async def test_body_that_is_not_json(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, url = model
    scripted.then(Raw(200, "{not json"))
    error = await failure(dialect, url, http)
    assert "not JSON" in str(error)
    assert isinstance(error.__cause__, ValueError)


@pytest.mark.parametrize(
    "body", ['{"unexpected": true}', "[1, 2]", '{"choices": [], "content": 3}']
)
async def test_json_without_the_promised_shape(
    dialect: Dialect, model: Model, http: httpx.AsyncClient, body: str
):
    scripted, url = model
    scripted.then(Raw(200, body))
    error = await failure(dialect, url, http)
    assert "model" in str(error)


async def test_connection_refused(dialect: Dialect, http: httpx.AsyncClient):
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()  # nothing listens there any more
    error = await failure(dialect, url, http)
    assert str(error).startswith("cannot reach the model endpoint (ConnectError")
    assert isinstance(error.__cause__, httpx.ConnectError)


async def test_request_timeout(dialect: Dialect, model: Model, http: httpx.AsyncClient):
    scripted, url = model
    scripted.then(HANG)
    error = await failure(dialect, url, http, request_timeout_s=0.1)
    assert str(error) == "the model request timed out after 0.1 s"


async def test_missing_key_variable(
    dialect: Dialect, model: Model, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(KEY_ENV)
    error = await failure(dialect, model[1], http)
    assert str(error) == f"the API key variable {KEY_ENV} is not set"
    assert model[0].requests == []
