"""The direct JSON-RPC send (node.peers.jsonrpc_direct) puts the SDK client's bytes on the wire.

A raw asyncio server on loopback records every request byte for byte and answers with scripted
HTTP responses. Each case goes through two PeerClients over one outbound client: one as built
(direct) and one with the direct sender removed (the official client's path); the JSON-RPC ids
are pinned, and the requests (request line, headers in order, body) must be identical, and so
must the call's outcome: its result, or its error type and message, and the retries made.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from a2a.helpers import new_text_part
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, Task
from google.protobuf import json_format

from node.errors import PeerError
from node.outbound_http import outbound_client
from node.peers import jsonrpc_direct
from node.peers.jsonrpc_direct import DirectJsonRpc, _request_params
from node.peers.peer_client import PeerClient
from node.peers.remote_tool import _data_part
from tests.peers.peers_support import peer_card

TASK = {
    "id": "t-1",
    "contextId": "c-1",
    "status": {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": "2026-12-02T04:00:00Z",
        "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "85"}]},
    },
    "artifacts": [{"artifactId": "a", "name": "calculate", "parts": [{"data": {"result": 85}}]}],
    "history": [{"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "hi"}]}],
    "metadata": {"a2a_node_calls": [{"tool": "calculate", "duration_ms": 0.1}]},
}


def rpc(result: Any = None, error: Any = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": "x"}
    body.update({"error": error} if error is not None else {"result": result})
    return json.dumps(body).encode()


def http_answer(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class RawPeer:
    """Records each request's bytes; answers with ``answers`` in turn (the last one repeats)."""

    answers: list[bytes]
    requests: list[bytes] = field(default_factory=list)
    start: int = 0  # the script starts again from here (each client's first request)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                request = head + await reader.readexactly(length)
                if request.startswith(b"GET"):  # nothing here asks for the card
                    raise AssertionError(request)
                self.requests.append(request)
                index = min(len(self.requests) - 1 - self.start, len(self.answers) - 1)
                writer.write(self.answers[index])
                await writer.drain()
        writer.close()


@contextlib.asynccontextmanager
async def raw_peer(*answers: bytes) -> AsyncIterator[tuple[str, RawPeer]]:
    peer = RawPeer(list(answers))
    server = await asyncio.start_server(peer.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", peer
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
def pinned_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = uuid.UUID(int=7)
    monkeypatch.setattr("a2a.client.transports.jsonrpc.uuid4", lambda: fixed)
    monkeypatch.setattr(jsonrpc_direct.uuid, "uuid4", lambda: fixed)


def message(kind: str) -> Message:
    meta: dict[str, Any] = {"urn:a2a-node:ext:hop:v1": {"chain": ["a"], "max_hops": 4.0}}
    if kind == "data":
        args = {"a": 2, "b": 0.5, "n": None, "ok": True, "list": [1, "é ☃", {"x": []}]}
        data = {"skill": "add", "arguments": {**args, "big": 12345678901234567890, "neg": -0.0}}
        parts = [_data_part(data)]
    elif kind == "text":
        parts = [new_text_part('hello \u2028 "quoted" \\ ü'), _data_part({"k": [1, 2]})]
        meta["skill"] = "shout"
    else:
        parts = [_data_part({})]
        meta = {}
    out = Message(message_id="m-1", role=Role.ROLE_USER, parts=parts, extensions=["urn:x"])
    if meta:
        out.metadata.update(meta)
    return out


async def both(
    url: str, peer: RawPeer, msg: Message, token: str | None = None
) -> tuple[list[Any], list[bytes], list[bytes]]:
    """The outcome and the requests, direct then through the SDK client."""
    card = peer_card(url, streaming=False)
    outcomes: list[Any] = []
    requests: list[list[bytes]] = []
    async with outbound_client(timeout=5.0) as http:
        for direct in (True, False):
            client = PeerClient("b", card, http=http, token=lambda: token, retries=3,
                                backoff_initial_s=0.01, backoff_max_s=0.02)  # fmt: skip
            assert client._direct is not None
            if not direct:
                client._direct = None
            before = peer.start = len(peer.requests)
            try:
                outcomes.append(await client.call(msg, deadline=time.time() + 5))
            except PeerError as exc:
                cause = exc.__cause__
                outcomes.append((str(exc), type(cause), str(cause)))
            requests.append(peer.requests[before:])
    return outcomes, requests[0], requests[1]


@pytest.mark.usefixtures("pinned_ids")
@pytest.mark.parametrize("kind", ["data", "text", "empty"])
@pytest.mark.parametrize("token", [None, "s3cret"])
async def test_the_request_on_the_wire_is_the_sdk_clients(kind: str, token: str | None) -> None:
    async with raw_peer(http_answer(rpc({"task": TASK}))) as (url, peer):
        outcomes, direct, sdk = await both(url, peer, message(kind), token)
    assert direct == sdk and len(direct) == 1
    assert outcomes == [{"result": 85}, {"result": 85}]
    if token:
        assert (
            b"Authorization: Bearer s3cret\r\n" in direct[0]
            or b"authorization: Bearer s3c" in (direct[0])
        )


ANSWERS = {
    "text artifact": [
        http_answer(
            rpc(
                {
                    "task": {
                        **TASK,
                        "artifacts": [
                            {"artifactId": "a", "parts": [{"text": "one"}, {"text": "two"}]}
                        ],
                    }
                }
            )
        )
    ],
    "no artifact": [http_answer(rpc({"task": {**TASK, "artifacts": []}}))],
    "failed": [
        http_answer(
            rpc(
                {
                    "task": {
                        **TASK,
                        "status": {
                            "state": "TASK_STATE_FAILED",
                            "message": {
                                "messageId": "m",
                                "role": "ROLE_AGENT",
                                "parts": [{"text": "boom"}],
                            },
                        },
                    }
                }
            )
        )
    ],
    "message": [
        http_answer(
            rpc(
                {"message": {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"data": {"v": 1}}]}}
            )
        )
    ],
    "neither": [http_answer(rpc({}))],
    "jsonrpc error": [http_answer(rpc(error={"code": -32001, "message": "Task not found"}))],
    "unknown error": [http_answer(rpc(error={"code": -1, "message": "odd"}))],
    "not json": [http_answer(b"<html>")],
    "list": [http_answer(b"[1, 2]")],
    "400": [http_answer(b"{}", "400 Bad Request")],
    "503 then ok": [
        http_answer(b"busy", "503 Service Unavailable"),
        http_answer(rpc({"task": TASK})),
    ],
    "503 always": [http_answer(b"busy", "503 Service Unavailable")],
    "gzip": [http_answer(gzip.compress(rpc({"task": TASK})), extra="content-encoding: gzip\r\n")],
    "bad timestamp": [
        http_answer(
            rpc(
                {
                    "task": {
                        **TASK,
                        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "yesterday"},
                    }
                }
            )
        )
    ],
    "rejected": [http_answer(rpc({"task": {**TASK, "status": {"state": "TASK_STATE_REJECTED"}}}))],
}


@pytest.mark.usefixtures("pinned_ids")
@pytest.mark.parametrize("case", list(ANSWERS))
async def test_every_answer_ends_the_call_as_through_the_sdk_client(case: str) -> None:
    async with raw_peer(*ANSWERS[case]) as (url, peer):
        outcomes, direct, sdk = await both(url, peer, message("data"))
    assert outcomes[0] == outcomes[1]
    assert direct == sdk  # retries included


def test_params_are_message_to_dict_for_every_message_shape() -> None:
    odd = message("data")
    odd.reference_task_ids.append("t-0")
    with_part_meta = message("text")
    with_part_meta.parts[0].metadata.update({"a": 1})
    file_part = Message(
        message_id="f", role=Role.ROLE_USER, parts=[Part(raw=b"\x00", filename="x")]
    )
    for msg in (message("data"), message("text"), message("empty"), odd, with_part_meta,
                file_part, Message()):  # fmt: skip
        for config in (None, SendMessageConfiguration(history_length=0),
                       SendMessageConfiguration(history_length=3, return_immediately=True),
                       SendMessageConfiguration(accepted_output_modes=["text/plain"])):  # fmt: skip
            request = SendMessageRequest(message=msg)
            if config is not None:
                request.configuration.CopyFrom(config)
            expected = json_format.MessageToDict(request)
            got = _request_params(request)
            assert json.dumps(got) == json.dumps(expected)  # same keys, order and values
    nan = SendMessageRequest(message=Message(parts=[_data_part({"x": float("nan")})]))
    with pytest.raises(json_format.Error, match="NaN"):
        _request_params(nan)


async def test_the_sdk_path_is_kept_where_the_result_could_differ() -> None:
    card = peer_card("http://127.0.0.1:9", streaming=False)
    async with outbound_client(timeout=5.0) as http:
        assert PeerClient("b", card, http=http)._direct is not None
        streaming = PeerClient("b", peer_card("http://127.0.0.1:9"), http=http, streaming=True)
        assert streaming._direct is None  # a streamed send
        rest = PeerClient("b", peer_card("http://127.0.0.1:9", streaming=False, rest_only=True),
                          http=http)  # fmt: skip
        assert rest._direct is None
    async with outbound_client(timeout=5.0, event_hooks={"response": []}) as http:
        assert PeerClient("b", card, http=http)._direct is not None

    async def hook(_: httpx.Response) -> None:
        return None

    async with outbound_client(timeout=5.0, event_hooks={"response": [hook]}) as http:
        assert PeerClient("b", card, http=http)._direct is None  # hooks see every response
    async with httpx.AsyncClient() as plain:
        assert PeerClient("b", card, http=plain)._direct is None  # not the outbound transport
    async with outbound_client(timeout=5.0) as http:
        direct = DirectJsonRpc.of(PeerClient("b", card, http=http)._client, http)
        assert direct is not None and direct.usable
    assert not direct.usable  # a closed client: the SDK's path raises its own error


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "float", "str", "bool", "null"] + (["list", "dict"] if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, 1, -7, 2**53 + 1, 10**20])
    if kind == "float":
        return rng.choice([0.5, -0.0, 1e300, 3.0])
    if kind == "str":
        return rng.choice(["", "x", "é ☃ \u2028", "3.0"])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {f"k{i}": random_json(rng, depth + 1) for i in range(rng.randrange(3))}


def test_the_answer_is_read_as_parse_dict_reads_it() -> None:
    rng = random.Random(13)
    docs: list[dict[str, Any]] = [
        {k: v for k, v in TASK.items() if k not in ("history", "metadata")},
        {},
        {"id": "t", "status": {}},
        {"id": "t", "status": {"message": {}}},
        {"artifacts": [{}, {"parts": []}, {"parts": [{"data": {}}, {"data": []}, {"text": ""}]}]},
        {"status": {"state": "TASK_STATE_FAILED", "timestamp": "2026-12-02T04:00:00.123456789Z"}},
    ]
    for _ in range(300):
        parts = [{"data": random_json(rng)} if rng.random() < 0.7 else {"text": "t"}
                 for _ in range(rng.randrange(1, 3))]  # fmt: skip
        docs.append({"id": "t", "artifacts": [{"artifactId": "a", "parts": parts}]})
    for doc in docs:
        fast = jsonrpc_direct.answer_task(doc)
        assert fast is not None, doc
        slow = json_format.ParseDict(doc, Task(), ignore_unknown_fields=True)
        assert fast == slow, doc
        assert fast.SerializeToString(deterministic=True) == slow.SerializeToString(
            deterministic=True
        )
    others: list[dict[str, Any]] = [
        {"id": 1},
        {"kind": "task"},
        {"status": {"state": "NOPE"}},
        {"status": {"state": 3}},
        {"status": {"timestamp": "yesterday"}},
        {"status": {"message": {"metadata": {}}}},
        {"artifacts": [{"parts": [{"text": "a", "metadata": {}}]}]},
        {"artifacts": [{"parts": [{"url": "http://x"}]}]},
        {"artifacts": ["x"]},
        {"artifacts": [{"metadata": {"a": 1}}]},
    ]
    for doc in others:
        assert jsonrpc_direct.answer_task(doc) is None, doc
