"""The HTTP edge refuses bodies the handlers and stores cannot take, on both bindings and stores.

In-process: the node's ASGI app with its real lifespan, over ``httpx.ASGITransport``.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from node.card import parse_card
from node.protocol import HOP
from node.server.app import build_node_app
from tests.server.conftest import A2A_HEADERS, card_data

JSON_HEADERS = {**A2A_HEADERS, "Content-Type": "application/json"}
STORES = [
    "sqlite",
    pytest.param(
        os.environ.get("A2A_NODE_TEST_PG_URL", ""),
        marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(
                not os.environ.get("A2A_NODE_TEST_PG_URL"), reason="no A2A_NODE_TEST_PG_URL"
            ),
        ],
        id="postgresql",
    ),
]


@pytest.fixture(params=STORES)
async def node(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client for one in-process node on a fresh store (its own table on PostgreSQL)."""
    store = request.param
    async with fresh_schema(store) as store_url:
        card = parse_card(card_data(peers={"max_hops": 4}), env={})
        app = build_node_app(
            card, public_url="http://node.test", data_dir=tmp_path, store=store_url
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://node.test") as c:
                yield c


@contextlib.asynccontextmanager
async def fresh_schema(store: str) -> AsyncIterator[str]:
    """``store``, or for PostgreSQL a URL whose tables live in a new schema, dropped after."""
    if not store.startswith("postgresql://"):
        yield store
        return
    import asyncpg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(store)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
        yield f"{store}?search_path={schema}"
    finally:
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await conn.close()


def rpc(method: str, params: dict[str, Any], id_: int | str = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def message(data: Any, **extra: Any) -> dict[str, Any]:
    return {
        "messageId": os.urandom(8).hex(),
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        **extra,
    }


def calc(expression: Any) -> dict[str, Any]:
    return {"skill": "calculate", "arguments": {"expression": expression}}


async def all_tasks(node: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Every task of the store, through both bindings (each must load)."""
    rest = await node.get("/rest/tasks", params={"pageSize": 100}, headers=A2A_HEADERS)
    assert rest.status_code == 200, rest.text
    answer = await node.post("/", json=rpc("ListTasks", {"pageSize": 100}), headers=A2A_HEADERS)
    assert "error" not in answer.json(), answer.text
    tasks: list[dict[str, Any]] = answer.json()["result"].get("tasks", [])
    assert len(tasks) == len(rest.json().get("tasks", []))
    for task in tasks:
        assert task["status"]["state"] not in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    return tasks


NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400", "-1e999", "1" + "0" * 400]


@pytest.mark.parametrize("literal", NON_FINITE)
async def test_non_finite_arguments_are_refused_on_json_rpc(
    node: httpx.AsyncClient, literal: str
) -> None:
    body = json.dumps(rpc("SendMessage", {"message": message(calc("__X__"))}))
    body = body.replace('"__X__"', literal)
    answer = (await node.post("/", content=body, headers=JSON_HEADERS)).json()
    assert answer["error"]["code"] == -32602
    assert "arguments.expression" in answer["error"]["message"]
    assert answer["id"] == 1
    assert await all_tasks(node) == []


@pytest.mark.parametrize("literal", NON_FINITE)
async def test_non_finite_metadata_is_refused_on_rest(
    node: httpx.AsyncClient, literal: str
) -> None:
    body = json.dumps({"message": message(calc("1+1"), metadata={"weight": "__X__"})})
    body = body.replace('"__X__"', literal)
    response = await node.post("/rest/message:send", content=body, headers=JSON_HEADERS)
    assert response.status_code == 400
    assert "message.metadata.weight" in response.json()["error"]["message"]
    assert await all_tasks(node) == []


async def test_a_valid_task_after_refused_ones_is_stored_and_readable(
    node: httpx.AsyncClient,
) -> None:
    bad = json.dumps(rpc("SendMessage", {"message": message(calc("__X__"))}))
    await node.post("/", content=bad.replace('"__X__"', "NaN"), headers=JSON_HEADERS)
    good = await node.post(
        "/", json=rpc("SendMessage", {"message": message(calc("6*7"))}), headers=A2A_HEADERS
    )
    assert good.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(await all_tasks(node)) == 1


@pytest.mark.parametrize(
    ("path", "expect"),
    [("/", lambda r: r.json()["error"]["code"] == -32700), ("/rest/message:send", None)],
)
async def test_invalid_utf8_is_a_parse_error_not_an_internal_one(
    node: httpx.AsyncClient, path: str, expect: Callable[[httpx.Response], bool] | None
) -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\xff\xfe"}}'
    response = await node.post(path, content=body, headers=JSON_HEADERS)
    if expect is None:
        assert response.status_code == 400
    else:
        assert expect(response)
    assert "UTF-8" in response.text


@pytest.mark.parametrize("path", ["/", "/rest/message:send"])
@pytest.mark.parametrize("depth", [65, 2_000, 200_000])
async def test_deep_json_is_an_invalid_request(
    node: httpx.AsyncClient, path: str, depth: int
) -> None:
    body = b"[" * depth + b"]" * depth
    response = await node.post(path, content=body, headers=JSON_HEADERS)
    if path == "/":
        assert response.json()["error"]["code"] == -32600
    else:
        assert response.status_code == 400
    assert "nested deeper than 64" in response.text
    assert "recursion" not in response.text


async def test_rest_refuses_text_plain_bodies(node: httpx.AsyncClient) -> None:
    body = json.dumps({"message": message(calc("1+1"))})
    headers = {**A2A_HEADERS, "Content-Type": "text/plain"}
    response = await node.post("/rest/message:send", content=body, headers=headers)
    assert response.status_code == 400
    assert "content type 'text/plain' is not supported" in response.json()["error"]["message"]
    assert await all_tasks(node) == []


@pytest.mark.parametrize(
    "path", ["/rest/nope", "/rest/tasks/x/y", "/rest/tasks/", "/rest/nope/", "/nope/", "/healthz/"]
)
async def test_unknown_paths_are_404_not_redirects(node: httpx.AsyncClient, path: str) -> None:
    response = await node.get(path, headers=A2A_HEADERS)
    assert response.status_code == 404
    assert "location" not in response.headers


async def test_a_caller_cannot_raise_the_nodes_hop_limit(node: httpx.AsyncClient) -> None:
    chain = ["a", "b", "c", "d"]  # the node's card allows 4 hops
    meta = {HOP: {"chain": chain, "max_hops": 1e9}}
    sent = rpc("SendMessage", {"message": message(calc("1+1"), metadata=meta)})
    task = (await node.post("/", json=sent, headers=A2A_HEADERS)).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert "hop limit 4 reached" in json.dumps(task["status"])
