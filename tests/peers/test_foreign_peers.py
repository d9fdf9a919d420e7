"""Peer tools calling peers that are not a2a-node: plain a2a-sdk 1.3 servers (JSON-RPC,
HTTP+JSON, gRPC-only) and 0.3-only servers (the SDK's compat routes), all on loopback.

Each peer's card is fetched the way the directory fetches it, and its skill is called through
the :class:`RemoteSkillTool` the node's executor runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from node.errors import InvalidArguments, PeerError
from node.peers.breaker import CircuitBreaker
from node.peers.cards import CardFetcher
from node.peers.grpc_channels import GrpcChannels, grpc_target
from node.peers.peer_client import PeerClient, is_transient
from node.peers.remote_tool import DEFAULT_PARAMETERS, RemoteSkillTool
from node.tooling.context import ToolContext
from tests.peers.foreign_peers import Answer, Plain, StartPlain, plain_card
from tests.servers import free_socket, url_of


async def echo_tool(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    peer: Plain,
    *,
    streaming: bool = False,
    **kw: Any,
) -> RemoteSkillTool:
    card = await CardFetcher(http).fetch(peer.url)
    client = PeerClient(
        "plain",
        card,
        http=http,
        grpc_channels=channels,
        streaming=streaming,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        **kw,
    )
    return RemoteSkillTool(client, card.skills[0], self_id="a", call_timeout_s=5.0)


def ctx() -> ToolContext:
    return ToolContext()


async def test_a_skill_without_a_schema_is_a_text_tool(
    http: httpx.AsyncClient, channels: GrpcChannels, start_plain: StartPlain
) -> None:
    peer = await start_plain("message")
    tool = await echo_tool(http, channels, peer)
    assert tool.parameters == DEFAULT_PARAMETERS
    assert tool.parameters["required"] == ["text"]
    assert tool.name == "plain__echo"
    assert tool.description == "[Plain] Answers what it was told"
    assert tool.policy.examples == ("say hello",)
    with pytest.raises(InvalidArguments, match="'text'"):
        await tool.execute({"data": {"n": 1}}, ctx())
    assert peer.seen.parts == []


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("answer", "result"),
    [("message", "hello, hi"), ("task", "report: hi"), ("status", "done: hi")],
)
async def test_a_plain_peer_answers_with_a_message_or_a_task(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    answer: Answer,
    result: str,
    streaming: bool,
) -> None:
    peer = await start_plain(answer)
    tool = await echo_tool(http, channels, peer, streaming=streaming)
    assert await tool.execute({"text": "hi"}, ctx()) == result
    assert peer.seen.parts == [[{"text": "hi"}]]
    assert peer.seen.http[0] == ("/", "1.0")


async def test_text_and_data_go_as_two_parts(
    http: httpx.AsyncClient, channels: GrpcChannels, start_plain: StartPlain
) -> None:
    peer = await start_plain("message")
    tool = await echo_tool(http, channels, peer)
    answer = await tool.execute({"text": "hi", "data": {"n": 2, "tags": ["x"]}}, ctx())
    assert answer == {"received": {"n": 2, "tags": ["x"]}}
    assert peer.seen.parts == [[{"text": "hi"}, {"data": {"n": 2.0, "tags": ["x"]}}]]


@pytest.mark.parametrize("bindings", [("JSONRPC", "HTTP+JSON"), ("GRPC",)])
async def test_a_failed_task_carries_the_peers_status_text(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    bindings: tuple[str, ...],
) -> None:
    peer = await start_plain("task", bindings=bindings)
    tool = await echo_tool(http, channels, peer)
    with pytest.raises(PeerError, match="task failed: cannot do: fail now"):
        await tool.execute({"text": "fail now"}, ctx())


async def test_a_card_preferring_http_json_is_called_over_rest(
    http: httpx.AsyncClient, channels: GrpcChannels, start_plain: StartPlain
) -> None:
    peer = await start_plain("task", bindings=("HTTP+JSON", "JSONRPC"))
    tool = await echo_tool(http, channels, peer)
    assert await tool.execute({"text": "hi"}, ctx()) == "report: hi"
    assert peer.seen.http == [("/rest/message:send", "1.0")]


async def test_a_card_preferring_grpc_is_called_over_grpc(
    http: httpx.AsyncClient, channels: GrpcChannels, start_plain: StartPlain
) -> None:
    peer = await start_plain("task", bindings=("GRPC", "JSONRPC"))
    tool = await echo_tool(http, channels, peer)
    assert await tool.execute({"text": "hi"}, ctx()) == "report: hi"
    assert peer.seen.http == []
    assert len(peer.seen.grpc_metadata) == 1


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(("answer", "result"), [("message", "hello, hi"), ("task", "report: hi")])
async def test_a_grpc_only_peer_gets_the_call_and_our_token_as_metadata(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    answer: Answer,
    result: str,
    streaming: bool,
) -> None:
    peer = await start_plain(answer, bindings=("GRPC",))
    assert [i.protocol_binding for i in peer.card.supported_interfaces] == ["GRPC"]
    tool = await echo_tool(http, channels, peer, streaming=streaming, token=lambda: "s3cret")
    assert await tool.execute({"text": "hi"}, ctx()) == result
    (metadata,) = peer.seen.grpc_metadata
    assert metadata["authorization"] == "Bearer s3cret"
    assert metadata["a2a-version"] == "1.0"


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("bindings", "path"),
    [(("JSONRPC", "HTTP+JSON"), "/"), (("HTTP+JSON", "JSONRPC"), "/rest/v1/message:")],
)
async def test_a_v0_3_only_peer_is_called_with_the_0_3_wire(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    bindings: tuple[str, ...],
    path: str,
    streaming: bool,
) -> None:
    peer = await start_plain("task", bindings=bindings, v03=True, pure_v03_card=True)
    served = (await http.get(f"{peer.url}/.well-known/agent-card.json")).json()
    assert "supportedInterfaces" not in served
    assert served["preferredTransport"] == bindings[0]
    tool = await echo_tool(http, channels, peer, streaming=streaming)
    assert {i.protocol_version for i in tool.peer.card.supported_interfaces} <= {"0.3", "0.3.0"}
    assert await tool.execute({"text": "hi"}, ctx()) == "report: hi"
    assert [p for p, _ in peer.seen.http if not p.startswith(path)] == []
    assert {v for _, v in peer.seen.http} == {"0.3"}
    with pytest.raises(PeerError, match="cannot do: fail"):
        await tool.execute({"text": "fail"}, ctx())


async def test_a_v0_3_grpc_only_peer_is_called_with_the_0_3_service(
    http: httpx.AsyncClient, channels: GrpcChannels, start_plain: StartPlain
) -> None:
    peer = await start_plain("message", bindings=("GRPC",), v03=True)
    tool = await echo_tool(http, channels, peer, token=lambda: "s3cret")
    assert await tool.execute({"text": "hi"}, ctx()) == "hello, hi"
    (metadata,) = peer.seen.grpc_metadata
    assert metadata["a2a-version"] == "0.3"
    assert metadata["authorization"] == "Bearer s3cret"


@pytest.mark.parametrize("bindings", [("JSONRPC",), ("GRPC",)])
async def test_past_the_deadline_the_peers_task_is_cancelled_on_every_binding(
    http: httpx.AsyncClient,
    channels: GrpcChannels,
    start_plain: StartPlain,
    bindings: tuple[str, ...],
) -> None:
    peer = await start_plain("task", bindings=bindings)
    card = await CardFetcher(http).fetch(peer.url)
    client = PeerClient("plain", card, http=http, grpc_channels=channels, streaming=True)
    tool = RemoteSkillTool(client, card.skills[0], self_id="a", call_timeout_s=0.5)
    with pytest.raises(PeerError, match="did not finish within"):
        await tool.execute({"text": "slow please"}, ctx())
    assert len(peer.seen.cancels) == 1
    assert client.breaker.state == "closed"  # it answered: only slow


IMPORT_ORDER_PROBE = """
import asyncio
import a2a.server.routes  # first, as a node imports it: a2a-sdk 1.3's import cycle
import httpx
from tests.peers.foreign_peers import plain_card
from node.peers.peer_client import PeerClient

async def main():
    card = plain_card("Legacy", [("GRPC", "127.0.0.1:9")], version="0.3")
    async with httpx.AsyncClient() as http:
        client = PeerClient("legacy", card, http=http)
        print(type(client._client._transport).__name__)
        await client.aclose()

asyncio.run(main())
"""


def test_a_0_3_grpc_peer_gets_the_0_3_transport_whatever_was_imported_first() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ORDER_PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        check=True,
    )
    assert done.stdout.strip() == "CompatGrpcTransport"


async def test_an_unreachable_grpc_peer_is_retried_then_trips_the_breaker(
    http: httpx.AsyncClient,
) -> None:
    sock = free_socket()  # bound, never listening: connections are refused
    card = plain_card("Gone", [("GRPC", url_of(sock).removeprefix("http://"))])
    counter = CountCalls()
    channel = grpc.aio.insecure_channel(
        grpc_target(card.supported_interfaces[0].url)[0], interceptors=[counter]
    )
    client = PeerClient(
        "gone",
        card,
        http=http,
        grpc_channels=lambda url: channel,
        breaker=CircuitBreaker(failures=2, cooldown_s=60),
        retries=3,
        backoff_initial_s=0.01,
        backoff_max_s=0.02,
    )
    tool = RemoteSkillTool(client, card.skills[0], self_id="a", call_timeout_s=5.0)
    try:
        for calls in (3, 6):
            with pytest.raises(PeerError, match=r"peer gone unreachable.*UNAVAILABLE"):
                await tool.execute({"text": "hi"}, ctx())
            assert counter.calls == calls  # every attempt, no more
        assert client.breaker.state == "open"
        with pytest.raises(PeerError, match="circuit open"):
            await tool.execute({"text": "hi"}, ctx())
        assert counter.calls == 6  # an open breaker sends nothing
    finally:
        await channel.close()
        sock.close()


class CountCalls(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts the unary calls made on a channel."""

    def __init__(self) -> None:
        self.calls = 0

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls += 1
        return await continuation(details, request)


def test_is_transient_knows_grpc_status_codes() -> None:
    def rpc_error(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "x")

    assert is_transient(rpc_error(grpc.StatusCode.UNAVAILABLE))
    assert is_transient(rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED))
    assert not is_transient(rpc_error(grpc.StatusCode.INVALID_ARGUMENT))
    assert not is_transient(rpc_error(grpc.StatusCode.UNAUTHENTICATED))
