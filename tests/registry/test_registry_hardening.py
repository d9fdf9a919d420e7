"""One registration must not break discovery for the whole network (both backends).

- A card the registry could not serve (non-finite numbers, NUL, lone surrogates, too deep, too
  long) is refused with 422 before anything is written.
- A row already poisoned in the database (an older version wrote it, or a person did) is set
  aside at load: listings, search, find_agents and restarts keep working, and it is counted.
- Hostile requests of every kind get a 4xx JSON error with a readable message that leaks nothing,
  and the registry stays healthy and fully listable.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from node.registry import RegistrySettings, build_registry_app
from node.registry.store import async_url
from tests.registry.conftest import LOOPBACK, CardServer, MakeClient
from tests.servers import free_socket, running

TOKEN = "write-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LEAKS = re.compile(
    r"Traceback|File \"|\.py\b|sqlalchemy|asyncpg|aiosqlite|sqlite3|psycopg|INSERT INTO|"
    r"SELECT |registry_agents|/work/|/tmp/|/home/|site-packages|0x[0-9a-f]{6,}",
    re.IGNORECASE,
)


# -- helpers -------------------------------------------------------------------------------------


def db_url(db: str) -> str:
    return async_url(RegistrySettings(db=db).db_url)


async def sql(db: str, statement: str, **params: Any) -> list[Any]:
    """Run one statement on the registry's database directly (no registry code involved)."""
    engine = create_async_engine(db_url(db))
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def stored_ids(db: str) -> list[str]:
    return sorted(row[0] for row in await sql(db, "SELECT id FROM registry_agents"))


def is_postgres(db: str) -> bool:
    return db.startswith("postgres")


async def listed(client: httpx.AsyncClient, **params: Any) -> list[str]:
    """Every id the registry lists with cards, one entry per page (so paging is exercised)."""
    ids: list[str] = []
    query: dict[str, Any] = {"include_card": "true", "page_size": 1, **params}
    for _ in range(50):
        response = await client.get("/v1/agents", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        for agent in body["agents"]:
            assert agent["card"]["name"] == agent["name"]
            ids.append(agent["id"])
        if not body["next_page_token"]:
            return ids
        query["page_token"] = body["next_page_token"]
    raise AssertionError("the listing never ended")


async def find_agents(client: httpx.AsyncClient, query: str) -> list[str]:
    """The ids find_agents answers with (JSON-RPC, text part searched as q)."""
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": query}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = await client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
    assert response.status_code == 200, response.text
    data = response.json()["result"]["message"]["parts"][0]["data"]
    assert "error" not in data, data
    return [a["id"] for a in data["agents"]]


async def register_good(client: httpx.AsyncClient, card_server: CardServer) -> None:
    for name in ("Alpha", "Beta"):
        skills = [card_server.skill("greet", "social")]
        url = card_server.put_card(f"/{name}.json", name, skills=skills)
        response = await client.post("/v1/agents", json={"card_url": url})
        assert response.status_code == 201, response.text


def with_literal(card: dict[str, Any], literal: str) -> bytes:
    """``card`` as JSON with the string "@@" replaced by a raw ``literal`` (NaN, 1e400, ...)."""
    return json.dumps(card).replace('"@@"', literal).encode()


# -- 1. refused before writing ---------------------------------------------------------------


def _in_params(card: dict[str, Any]) -> None:
    card["capabilities"]["extensions"][0]["params"]["weight"] = "@@"


def _in_unknown_field(card: dict[str, Any]) -> None:
    card["x-vendor"] = {"values": [1, "@@"]}


BAD_CARDS: dict[str, tuple[Callable[[dict[str, Any]], None], str, str]] = {
    # name: (where "@@" goes, the literal, a word the reason must contain)
    "NaN in an extension's params": (_in_params, "NaN", "NaN"),
    "Infinity in an unknown field": (_in_unknown_field, "Infinity", "Infinity"),
    "-Infinity in an extension's params": (_in_params, "-Infinity", "Infinity"),
    "1e400 in an extension's params": (_in_params, "1e400", "finite"),
    "a 400-digit integer": (_in_params, "1" + "0" * 400, "double"),
    "NUL in an unknown field": (_in_unknown_field, '"a\\u0000b"', "NUL"),
    "NUL in the description": (lambda c: c.update(description="@@"), '"x\\u0000"', "NUL"),
    "a lone surrogate": (_in_unknown_field, '"\\ud800"', "surrogate"),
    "nested 100 deep": (_in_unknown_field, "[" * 100 + "]" * 100, "deeper"),
    "nested 50,000 deep": (_in_unknown_field, "[" * 50_000 + "]" * 50_000, "deeper"),
    "a 300-character name": (lambda c: c.update(name="@@"), json.dumps("N" * 300), "name"),
    "a 300-character tag": (
        lambda c: c["skills"][0].update(tags=["@@"]),
        json.dumps("t" * 300),
        "tags",
    ),
}


@pytest.mark.parametrize("case", list(BAD_CARDS))
async def test_a_card_the_registry_could_not_serve_is_refused_and_nothing_is_written(
    make_client: MakeClient, card_server: CardServer, db: str, case: str
) -> None:
    place, literal, reason = BAD_CARDS[case]
    card = card_server.card("Bad", agent_id="bad", skills=[card_server.skill("s", "t")])
    place(card)
    url = card_server.put("/bad.json", with_literal(card, literal))
    async with make_client(db=db) as client:
        response = await client.post("/v1/agents", json={"card_url": url})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_card"
        assert reason in error["message"], error["message"]
        assert not LEAKS.search(response.text), response.text
        assert await stored_ids(db) == []
        assert await listed(client) == []
        await register_good(client, card_server)  # and the registry goes on as before
        assert await listed(client) == ["alpha", "beta"]
    assert await stored_ids(db) == ["alpha", "beta"]


# -- 2. poisoned rows already in the database ------------------------------------------------


@dataclass
class Poison:
    """Column values of a row written behind the registry's back (``None``: a valid value)."""

    only: str | None = None  # "sqlite" or "postgres" when the other backend cannot hold it
    id: str = "poison"
    columns: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        card = {
            "name": "Poison",
            "description": "d",
            "version": "1",
            "supportedInterfaces": [{"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC"}],
            "capabilities": {},
            "skills": [],
        }
        return {
            "id": self.id,
            "card_url": "http://127.0.0.1:9/poison.json",
            "name": "Poison",
            "description": "greets too",
            "skills": '[{"id": "greet", "name": "Greet", "description": "", "tags": ["social"]}]',
            "card": json.dumps(card),
            "registered_at": 1_700_000_000.0,
            "last_seen": 1_700_000_000.0,
        } | self.columns


def _card_with(literal: str) -> str:
    return json.dumps({"name": "Poison", "x": "@@"}).replace('"@@"', literal)


POISONS: dict[str, Poison] = {
    "NaN in the card": Poison("sqlite", columns={"card": _card_with("NaN")}),
    "Infinity in the card": Poison("sqlite", columns={"card": _card_with("-Infinity")}),
    "a lone surrogate in the card": Poison(columns={"card": _card_with('"\\udc00"')}),
    "NUL in the card": Poison(columns={"card": _card_with('"\\u0000"')}),
    "a card nested 5000 deep": Poison(columns={"card": _card_with("[" * 5000 + "]" * 5000)}),
    "a card that is not an object": Poison(columns={"card": "[1, 2]"}),
    "a card that is not JSON": Poison("sqlite", columns={"card": "{not json"}),
    "skills that are not skills": Poison(columns={"skills": '{"id": 1}'}),
    "a skill without tags": Poison(columns={"skills": '[{"id": "greet"}]'}),
    "last_seen is Infinity": Poison(columns={"last_seen": float("inf")}),
    "last_seen is NaN": Poison("postgres", columns={"last_seen": float("nan")}),
    "last_seen past the year 9999": Poison(columns={"last_seen": 1e15}),
    "last_seen is text": Poison("sqlite", columns={"last_seen": "soon"}),
    "a name of invalid UTF-8": Poison("sqlite", columns={"name": b"\xff\xfe"}),
    "a name with NUL": Poison("sqlite", columns={"name": "Poi\x00son"}),
    "a 10,000-character name": Poison(columns={"name": "P" * 10_000}),
    "an id with NUL": Poison("sqlite", id="poi\x00son"),
    "an id no agent can have": Poison(id="../poison"),
    "a card_url that is no URL": Poison(columns={"card_url": "javascript:alert(1)"}),
}


async def insert(db: str, poison: Poison) -> None:
    values = poison.row()
    if is_postgres(db):
        json_value = "CAST(CAST(:{0} AS TEXT) AS JSON)"
        float_value = "CAST(:{0} AS DOUBLE PRECISION)"
    else:
        json_value = float_value = ":{0}"
    columns = ", ".join(values)
    placeholders = ", ".join(
        json_value.format(k)
        if k in ("skills", "card")
        else float_value.format(k)
        if k in ("registered_at", "last_seen")
        else f":{k}"
        for k in values
    )
    await sql(db, f"INSERT INTO registry_agents ({columns}) VALUES ({placeholders})", **values)


ENGINE_MARKS = {"sqlite": (), "postgres": (pytest.mark.postgres,)}
POISONED = [
    pytest.param(engine, case, id=f"{engine}-{case}", marks=marks)
    for case, poison in POISONS.items()
    for engine, marks in ENGINE_MARKS.items()
    if poison.only in (None, engine)  # a value only one engine can hold is tested on that one
]


@pytest.mark.parametrize(("db", "case"), POISONED, indirect=["db"])
async def test_a_poisoned_row_is_set_aside_and_discovery_keeps_working(
    make_client: MakeClient, card_server: CardServer, db: str, case: str
) -> None:
    poison = POISONS[case]
    async with make_client(db=db) as client:
        await register_good(client, card_server)
    await insert(db, poison)

    for _restart in range(2):  # the poisoned row survives restarts; so does the registry
        async with make_client(db=db) as client:
            assert await listed(client) == ["alpha", "beta"]
            assert await listed(client, q="greet") == ["alpha", "beta"]
            assert await listed(client, skill="greet", healthy="false") == []
            assert await find_agents(client, "greet") == ["alpha", "beta"]
            health = (await client.get("/healthz")).json()
            assert health == {"status": "ok", "agents": 2, "unreadable": 1}
            page = (await client.get("/v1/agents", params={"include_card": "true"})).json()
            assert page["unreadable"] == 1
            if poison.id == "poison":
                for method, path in (
                    ("GET", "/v1/agents/poison"),
                    ("PUT", "/v1/agents/poison/heartbeat"),
                ):
                    answer = await client.request(method, path)
                    assert answer.status_code == 404, answer.text
                    assert answer.json()["error"]["code"] == "unreadable_entry"

    async with make_client(db=db) as client:
        if poison.id == "poison":  # an operator (or the agent registering again) clears it
            assert (await client.delete("/v1/agents/poison")).status_code == 204
            assert (await client.get("/healthz")).json()["unreadable"] == 0
        assert await listed(client) == ["alpha", "beta"]
    if poison.id == "poison":
        assert await stored_ids(db) == ["alpha", "beta"]


async def test_registering_again_replaces_an_unreadable_row(
    make_client: MakeClient, card_server: CardServer, db: str
) -> None:
    url = card_server.put_card("/poison.json", "Poison", agent_id="poison")
    async with make_client(db=db):
        pass  # creates the schema
    await insert(db, Poison(columns={"card_url": url, "card": _card_with('"\\udc00"')}))
    async with make_client(db=db) as client:
        assert (await client.get("/healthz")).json()["unreadable"] == 1
        response = await client.post("/v1/agents", json={"card_url": url})
        assert response.status_code == 201, response.text
        assert (await client.get("/healthz")).json() == {
            "status": "ok",
            "agents": 1,
            "unreadable": 0,
        }
        assert await listed(client) == ["poison"]


# -- 3. hostile requests -------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    name: str
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None  # the exact status when it matters (else any 4xx)


JSON_TYPE = {"Content-Type": "application/json"}


def post(name: str, body: bytes | str, status: int | None = None, **headers: str) -> Hostile:
    raw = body.encode() if isinstance(body, str) else body
    return Hostile(name, "POST", "/v1/agents", raw, {**JSON_TYPE, **headers}, status)


def get(name: str, path: str, status: int | None = None) -> Hostile:
    return Hostile(name, "GET", path, status=status)


URL = "http://127.0.0.1:9/card.json"


def b64(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


HOSTILE: list[Hostile] = [
    # bodies
    post("malformed JSON", "{not json", 400),
    post("truncated JSON", '{"card_url": ', 400),
    post("empty body", b"", 400),
    post("invalid UTF-8", b'{"card_url": "\xff\xfe"}', 400),
    post("UTF-16 body", json.dumps({"card_url": URL}).encode("utf-16"), 400),
    post("BOM before JSON", b"\xef\xbb\xbf" + json.dumps({"card_url": URL}).encode(), 400),
    post("arrays nested 200,000 deep", b"[" * 200_000 + b"]" * 200_000, 400),
    post("objects nested 100,000 deep", b'{"a":' * 100_000 + b"1" + b"}" * 100_000, 400),
    post("unbalanced 300,000 brackets", b"[" * 300_000, 400),
    post("nesting 65 deep beside card_url", f'{{"card_url": "{URL}", "x": {"[" * 65}{"]" * 65}}}'),
    post("card_url NaN", '{"card_url": NaN}', 400),
    post("Infinity beside card_url", f'{{"card_url": "{URL}", "x": Infinity}}', 400),
    post("-Infinity beside card_url", f'{{"card_url": "{URL}", "x": [-Infinity]}}', 400),
    post("1e400 beside card_url", f'{{"card_url": "{URL}", "x": 1e400}}', 400),
    post("a 400-digit integer", f'{{"card_url": "{URL}", "x": {"7" * 400}}}', 400),
    post("a 5000-digit integer", f'{{"card_url": "{URL}", "x": {"7" * 5000}}}', 400),
    post("card_url a number", '{"card_url": 123}', 400),
    post("card_url null", '{"card_url": null}', 400),
    post("card_url a list", f'{{"card_url": ["{URL}"]}}', 400),
    post("card_url an object", f'{{"card_url": {{"url": "{URL}"}}}}', 400),
    post("card_url true", '{"card_url": true}', 400),
    post("body a list", f'["{URL}"]', 400),
    post("body a string", f'"{URL}"', 400),
    post("body null", "null", 400),
    post("no card_url", '{"url": "x"}', 400),
    post("card_url with NUL", '{"card_url": "http://127.0.0.1:9/\\u0000.json"}', 400),
    post("key with NUL", f'{{"card_url": "{URL}", "a\\u0000b": 1}}', 400),
    post("card_url a lone surrogate", '{"card_url": "http://127.0.0.1:9/\\ud800"}', 400),
    post("card_url with CR LF", '{"card_url": "http://127.0.0.1:9/\\r\\nX-Evil: 1"}', 400),
    post("card_url 3,000 characters", json.dumps({"card_url": URL + "a" * 3000}), 400),
    post("card_url 2,000 two-byte characters", json.dumps({"card_url": URL + "é" * 1100}), 400),
    post("card_url bad IPv6", '{"card_url": "http://[::1/card.json"}', 400),
    post("card_url port 99999", '{"card_url": "http://127.0.0.1:99999/card.json"}', 400),
    post("card_url javascript:", '{"card_url": "javascript:alert(1)"}', 400),
    post("body over 1 MiB", json.dumps({"card_url": URL, "x": "y" * (1024 * 1024)}), 413),
    post("text/plain", json.dumps({"card_url": URL}), 415, **{"Content-Type": "text/plain"}),
    post(
        "form encoded",
        f"card_url={URL}",
        415,
        **{"Content-Type": "application/x-www-form-urlencoded"},
    ),
    post(
        "JSON in latin-1",
        json.dumps({"card_url": URL}),
        415,
        **{"Content-Type": "application/json; charset=latin-1"},
    ),
    post("multipart", b"--x\r\n\r\n--x--", 415, **{"Content-Type": "multipart/form-data; b=x"}),
    post("no token", json.dumps({"card_url": URL}), 401, Authorization=""),
    post("wrong token", json.dumps({"card_url": URL}), 403, Authorization="Bearer nope"),
    # query parameters
    get("page_size a word", "/v1/agents?page_size=abc", 400),
    get("page_size 0", "/v1/agents?page_size=0", 400),
    get("page_size 10^30", "/v1/agents?page_size=" + "1" + "0" * 30, 400),
    get("page_size 1e3", "/v1/agents?page_size=1e3", 400),
    get("page_size 5000 digits", "/v1/agents?page_size=" + "9" * 5000, 400),
    get("page_size Arabic digits", "/v1/agents?page_size=%D9%A3", 400),
    get("healthy maybe", "/v1/agents?healthy=maybe", 400),
    get("include_card yes", "/v1/agents?include_card=yes", 400),
    get("q with NUL", "/v1/agents?q=a%00b", 400),
    get("skill with NUL", "/v1/agents?skill=%00", 400),
    get("tag 5000 characters", "/v1/agents?tag=" + "t" * 5000, 400),
    get("q 2000 characters", "/v1/agents?q=" + "q" * 2000, 400),
    get("unknown parameter", "/v1/agents?healty=true", 400),
    get("a parameter twice", "/v1/agents?skill=a&skill=b", 400),
    get("page_token garbage", "/v1/agents?page_token=!!!", 400),
    get("page_token NUL", "/v1/agents?page_token=%00", 400),
    get("page_token 5000 characters", "/v1/agents?page_token=" + "A" * 5000, 400),
    get("page_token not JSON", "/v1/agents?page_token=" + b64(b"not json"), 400),
    get("page_token wrong types", "/v1/agents?page_token=" + b64(b"[1, 2]"), 400),
    get("page_token NaN", "/v1/agents?page_token=" + b64(b'[NaN, "a"]'), 400),
    get("page_token nested 900 deep", "/v1/agents?page_token=" + b64(b"[" * 900 + b"]" * 900), 400),
    get("page_token invalid UTF-8", "/v1/agents?page_token=" + b64(b'["\xff", "a"]'), 400),
    # paths and methods
    get("trailing slash", "/v1/agents/", 404),
    get("unknown path", "/v1/agent", 404),
    get("healthz with slash", "/healthz/", 404),
    get("openapi with slash", "/v1/openapi.json/", 404),
    get("no such path", "/etc/passwd", 404),
    get("encoded slash in id", "/v1/agents/a%2Fb", 404),
    get("id with NUL", "/v1/agents/a%00b", 400),
    get("id 300 characters", "/v1/agents/" + "a" * 300, 400),
    get("id with a space", "/v1/agents/a%20b", 400),
    get("unknown id", "/v1/agents/nobody", 404),
    get("unknown A2A REST path", "/a2a/rest/nope", 404),
    Hostile("DELETE id with NUL", "DELETE", "/v1/agents/%00", headers=AUTH, status=400),
    Hostile("heartbeat long id", "PUT", "/v1/agents/" + "b" * 500 + "/heartbeat", headers=AUTH),
    Hostile("heartbeat unknown id", "PUT", "/v1/agents/nobody/heartbeat", headers=AUTH, status=404),
    Hostile("PATCH the collection", "PATCH", "/v1/agents", headers=AUTH, status=405),
    Hostile("DELETE the collection", "DELETE", "/v1/agents", headers=AUTH, status=405),
    Hostile("POST an entry", "POST", "/v1/agents/alpha", b"{}", {**JSON_TYPE, **AUTH}, 405),
    Hostile("PUT the health check", "PUT", "/healthz", headers=AUTH, status=405),
]


def problem(case: Hostile, response: httpx.Response) -> str | None:
    """What is wrong with the answer to ``case``, or ``None``."""
    shown = response.text[:300]
    if not 400 <= response.status_code < 500:
        return f"HTTP {response.status_code}: {shown}"
    if case.status is not None and response.status_code != case.status:
        return f"HTTP {response.status_code}, expected {case.status}: {shown}"
    if LEAKS.search(response.text):
        return f"leaks internals: {shown}"
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return f"not a JSON error: {shown}"
    if not isinstance(error.get("code"), str) or error["code"] in ("internal", ""):
        return f"no useful code: {shown}"
    if not isinstance(error.get("message"), str) or len(error["message"]) < 8:
        return f"no readable message: {shown}"
    return None


@contextlib.asynccontextmanager
async def served_registry(db: str) -> AsyncIterator[str]:
    settings = RegistrySettings(db=db, allow_cidrs=LOOPBACK, token=SecretStr(TOKEN))
    async with running(build_registry_app(settings), free_socket()) as url:
        yield url


async def test_hostile_requests_get_clear_4xx_answers_and_the_registry_keeps_serving(
    card_server: CardServer, db: str
) -> None:
    async with (
        served_registry(db) as url,
        httpx.AsyncClient(base_url=url, timeout=10, headers=AUTH) as http,
    ):
        assert len({case.name for case in HOSTILE}) == len(HOSTILE) >= 40
        await register_good(http, card_server)
        problems = []
        for case in HOSTILE:
            headers = {k: v for k, v in {**AUTH, **case.headers}.items() if v}
            request = http.build_request(case.method, url + case.path, content=case.body)
            for name in ("authorization", "content-type"):
                request.headers.pop(name, None)
            request.headers.update(headers)
            response = await http.send(request)
            if (found := problem(case, response)) is not None:
                problems.append(f"{case.name}: {found}")
            assert (await http.get("/healthz")).status_code == 200, case.name  # still serving
        assert not problems, "\n".join(problems)
        assert await listed(http) == ["alpha", "beta"]
        assert (await http.get("/healthz")).json() == {"status": "ok", "agents": 2, "unreadable": 0}
        url_c = card_server.put_card("/Gamma.json", "Gamma")
        assert (await http.post("/v1/agents", json={"card_url": url_c})).status_code == 201
        assert await listed(http) == ["alpha", "beta", "gamma"]
    assert await stored_ids(db) == ["alpha", "beta", "gamma"]


def _send(arguments_literal: str) -> tuple[bytes, bytes]:
    """A find_agents SendMessage as (JSON-RPC body, REST body), ``arguments`` given raw."""
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": "@@"}]}
    data = '{"skill": "find_agents", "arguments": ' + arguments_literal + "}"
    rpc = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}
    rest = {"message": message}
    return (
        json.dumps(rpc).replace('"@@"', data).encode(),
        json.dumps(rest).replace('"@@"', data).encode(),
    )


def _both(raw: bytes) -> tuple[bytes, bytes]:
    return raw, raw


A2A_HOSTILE: dict[str, tuple[tuple[bytes, bytes], str]] = {
    "arrays nested 200,000 deep": (_both(b"[" * 200_000 + b"]" * 200_000), "application/json"),
    "objects nested 50,000 deep": (
        _both(b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
        "application/json",
    ),
    "limit NaN": (_send('{"limit": NaN}'), "application/json"),
    "limit 1e400": (_send('{"limit": 1e400}'), "application/json"),
    "q -Infinity": (_send('{"q": -Infinity}'), "application/json"),
    "invalid UTF-8": (
        _both(_send('{"q": "@Q@"}')[0].replace(b"@Q@", b"\xff")),
        "application/json",
    ),
    "text/plain": (_send('{"q": "a"}'), "text/plain"),
}


@pytest.mark.parametrize("case", list(A2A_HOSTILE))
async def test_find_agents_bindings_refuse_hostile_bodies_with_clear_errors(
    client: httpx.AsyncClient, card_server: CardServer, case: str
) -> None:
    await register_good(client, card_server)
    (rpc_body, rest_body), content_type = A2A_HOSTILE[case]
    headers = {"A2A-Version": "1.0", "Content-Type": content_type}
    answer = await client.post("/a2a", content=rpc_body, headers=headers)
    assert answer.status_code == 200, answer.text  # JSON-RPC errors travel in the body
    error = answer.json()["error"]
    assert error["code"] != -32603, error  # a request error, not an internal one
    assert len(error["message"]) >= 8 and not LEAKS.search(answer.text), answer.text
    rest = await client.post("/a2a/rest/message:send", content=rest_body, headers=headers)
    assert 400 <= rest.status_code < 500, rest.text
    assert not LEAKS.search(rest.text), rest.text
    assert await find_agents(client, "greet") == ["alpha", "beta"]


async def test_an_entry_that_stops_rendering_is_set_aside_while_the_rest_is_served(
    make_client: MakeClient, card_server: CardServer, clock: Any
) -> None:
    """The last line of defence: an entry that cannot be rendered any more (here: a heartbeat
    pushes its expiry past the year 9999) is set aside and counted; nothing answers 500."""
    clock.now = 253_402_300_799.0 - 100  # 9999-12-31T23:58:19Z
    async with make_client() as client:
        await register_good(client, card_server)
        clock.advance(80)
        answer = await client.put("/v1/agents/alpha/heartbeat")
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == "unreadable_entry"
        assert await listed(client) == ["beta"]
        assert (await client.get("/healthz")).json()["unreadable"] == 1
        assert await find_agents(client, "greet") == ["beta"]
    async with make_client() as client:  # and after a restart
        assert await listed(client) == ["beta"]
        assert (await client.get("/v1/agents/alpha")).json()["error"]["code"] == "unreadable_entry"
