from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from node.errors import ErrorKind, PeerError, ToolError
from node.outbound_http import outbound_client
from node.peers.breaker import CircuitBreaker
from node.peers.cards import CardFetcher
from node.peers.peer_client import PeerClient
from node.peers.remote_tool import DEFAULT_PARAMETERS, RemoteSkillTool, tool_name
from node.protocol import HOP
from node.tooling.context import ToolContext
from tests.peers.peers_support import (
    Flaky,
    PeerFactory,
    Recorder,
    RequireToken,
    peer_app,
    peer_card,
)
from tests.servers import free_socket, running, url_of


def skill_tool(
    http: httpx.AsyncClient,
    card: AgentCard,
    skill_id: str,
    *,
    call_timeout_s: float = 5.0,
    **kw: Any,
) -> RemoteSkillTool:
    client = PeerClient("b", card, http=http, backoff_initial_s=0.01, backoff_max_s=0.05, **kw)
    skill = next(s for s in card.skills if s.id == skill_id)
    return RemoteSkillTool(client, skill, self_id="a", call_timeout_s=call_timeout_s)


def ctx(**fields: Any) -> ToolContext:
    return ToolContext(**fields)


@pytest.mark.parametrize("streaming", [True, False])
async def test_completed_task_returns_its_data_artifact(
    http: httpx.AsyncClient, start_peer: PeerFactory, streaming: bool
) -> None:
    peer = await start_peer(streaming=streaming)
    card = await CardFetcher(http).fetch(peer.url)
    tool = skill_tool(http, card, "add")
    assert await tool.execute({"a": 2, "b": 3}, ctx()) == {"sum": 5}


async def test_rest_binding_works_too(http: httpx.AsyncClient, start_peer: PeerFactory) -> None:
    peer = await start_peer(rest_only=True)
    assert await skill_tool(http, peer.card, "add").execute({"a": 1, "b": 1}, ctx()) == {"sum": 2}


async def test_tool_shape_comes_from_the_card(http: httpx.AsyncClient) -> None:
    card = peer_card("http://127.0.0.1:9")
    add, shout = skill_tool(http, card, "add"), skill_tool(http, card, "shout")
    assert add.name == "b__add"
    assert add.policy.group == "peer:b"
    assert add.scope == "internal"
    assert add.description == "[Peer B] Add two numbers"
    assert add.read_only
    assert add.parameters["required"] == ["a", "b"]
    assert add.policy.tags == ("math",)
    assert shout.parameters == DEFAULT_PARAMETERS
    add.check()


def test_tool_names_are_sanitised_and_bounded() -> None:
    assert tool_name("peer.one", "web search") == "peer_one__web_search"
    long_a, long_b = tool_name("p" * 40, "s" * 40 + "a"), tool_name("p" * 40, "s" * 40 + "b")
    assert len(long_a) == 64
    assert long_a != long_b


async def test_text_skill_sends_text_and_names_the_skill(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    assert await skill_tool(http, peer.card, "shout").execute({"text": "hi"}, ctx()) == "HI"
    assert peer.recorder.metadata[-1]["skill"] == "shout"


async def test_failed_task_is_a_peer_error_with_its_reason(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    with pytest.raises(PeerError, match=r"peer b task failed: boom: b is bad"):
        await skill_tool(http, peer.card, "fail").execute({}, ctx())


async def test_input_required_is_a_peer_error_and_the_parked_task_is_cancelled(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    with pytest.raises(PeerError, match=r"peer b task input-required: need 'b'"):
        await skill_tool(http, peer.card, "ask").execute({}, ctx())
    assert len(peer.recorder.cancels) == 1


async def test_slow_peer_hits_the_deadline_and_its_task_is_cancelled(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    tool = skill_tool(http, peer.card, "slow", call_timeout_s=0.3, streaming=True)
    with pytest.raises(PeerError, match=r"peer b did not finish within 0\.3s"):
        await tool.execute({}, ctx())
    assert len(peer.recorder.cancels) == 1


async def test_blocking_send_to_a_slow_peer_times_out_at_the_deadline(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer(streaming=False)
    tool = skill_tool(http, peer.card, "slow", call_timeout_s=0.3)
    with pytest.raises(PeerError, match="did not finish"):
        await tool.execute({}, ctx())


async def test_hop_metadata_is_forwarded_with_the_remaining_time(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    deadline = time.time() + 4
    incoming = {HOP: {"chain": ["x"], "max_hops": 3, "deadline": deadline}}
    tool = skill_tool(http, peer.card, "hops", call_timeout_s=10)
    hop = await tool.execute({}, ctx(message_metadata=incoming, agent_id="a"))
    assert hop["chain"] == ["x", "a"]
    assert hop["max_hops"] == 3
    assert hop["deadline"] == pytest.approx(deadline)  # 10 s timeout does not extend it


async def test_fresh_call_starts_a_chain_with_the_call_timeout(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    before = time.time()
    hop = await skill_tool(http, peer.card, "hops", call_timeout_s=2).execute({}, ctx())
    assert hop["chain"] == ["a"]
    assert hop["max_hops"] == 4
    assert before + 2 <= hop["deadline"] <= time.time() + 2


async def test_call_that_would_loop_is_refused_before_sending(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer()
    incoming = {HOP: {"chain": ["b"], "max_hops": 4}}
    with pytest.raises(ToolError, match="loop: b → a → b") as info:
        await skill_tool(http, peer.card, "add").execute(
            {"a": 1, "b": 2}, ctx(message_metadata=incoming)
        )
    assert info.value.kind is ErrorKind.HOP_LIMIT
    assert peer.recorder.metadata == []


async def test_call_past_the_hop_limit_is_refused(http: httpx.AsyncClient) -> None:
    incoming = {HOP: {"chain": ["x", "y"], "max_hops": 3}}
    tool = skill_tool(http, peer_card("http://127.0.0.1:9"), "add")
    with pytest.raises(ToolError, match="hop limit 3") as info:
        await tool.execute({"a": 1, "b": 2}, ctx(message_metadata=incoming))
    assert info.value.kind is ErrorKind.HOP_LIMIT


async def test_absent_peer_is_retried_then_the_breaker_opens(http: httpx.AsyncClient) -> None:
    sock = free_socket()  # bound, never listening: connections are refused
    attempts: list[httpx.Request] = []

    async def count(request: httpx.Request) -> None:
        attempts.append(request)

    counting = outbound_client(timeout=5.0, event_hooks={"request": [count]})
    async with counting:
        breaker = CircuitBreaker(failures=2, cooldown_s=60)
        tool = skill_tool(counting, peer_card(url_of(sock)), "add", breaker=breaker, retries=3)
        for _ in range(2):
            with pytest.raises(PeerError, match="peer b unreachable") as info:
                await tool.execute({"a": 1, "b": 2}, ctx())
            assert isinstance(info.value.__cause__, Exception)
        assert len(attempts) == 6
        with pytest.raises(PeerError, match=r"peer b circuit open; retry after 60s"):
            await tool.execute({"a": 1, "b": 2}, ctx())
        assert len(attempts) == 6
    sock.close()


async def test_peer_answering_503_twice_succeeds_on_retry(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    flaky: list[Flaky] = []

    def wrap(app: Any) -> Flaky:
        flaky.append(Flaky(app, failures=2))
        return flaky[0]

    peer = await start_peer(wrap=wrap)
    tool = skill_tool(http, peer.card, "add", retries=3)
    assert await tool.execute({"a": 2, "b": 2}, ctx()) == {"sum": 4}
    assert flaky[0].refused == 2


async def test_bearer_token_is_sent_from_its_source(
    http: httpx.AsyncClient, start_peer: PeerFactory
) -> None:
    peer = await start_peer(wrap=lambda app: RequireToken(app, "s3cret"))
    with pytest.raises(PeerError, match="refused the call"):
        await skill_tool(http, peer.card, "add").execute({"a": 1, "b": 1}, ctx())
    tool = skill_tool(http, peer.card, "add", token=lambda: "s3cret")
    assert await tool.execute({"a": 1, "b": 1}, ctx()) == {"sum": 2}


async def test_breaker_lets_a_trial_through_after_the_cooldown(http: httpx.AsyncClient) -> None:
    now = [0.0]
    sock = free_socket()  # the peer is down first, then starts on the same port
    card = peer_card(url_of(sock))
    breaker = CircuitBreaker(failures=1, cooldown_s=10, clock=lambda: now[0])
    tool = skill_tool(http, card, "add", breaker=breaker, retries=1)
    with pytest.raises(PeerError, match="unreachable"):
        await tool.execute({"a": 1, "b": 2}, ctx())
    async with running(peer_app(card, Recorder()), sock):
        with pytest.raises(PeerError, match="circuit open"):
            await tool.execute({"a": 1, "b": 2}, ctx())
        now[0] += 10
        assert await tool.execute({"a": 1, "b": 2}, ctx()) == {"sum": 3}
        assert breaker.state == "closed"
