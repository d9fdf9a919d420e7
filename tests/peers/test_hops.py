from __future__ import annotations

import math

import pytest

from node.errors import ErrorKind, ToolError
from node.peers.hops import HopState, check_hop, forward_metadata, read_hop, remaining
from node.protocol import HOP

NOW = 1_000_000.0


def hop_error(state: HopState, self_id: str, now: float = NOW) -> ToolError:
    with pytest.raises(ToolError) as info:
        check_hop(state, self_id, now)
    assert info.value.kind is ErrorKind.HOP_LIMIT
    return info.value


def test_no_hop_metadata_is_a_fresh_chain() -> None:
    assert read_hop(None, default_max_hops=4) == HopState((), 4, None)
    assert read_hop({"other": 1}, default_max_hops=3) == HopState((), 3, None)


def test_read_hop_reads_chain_limit_and_deadline() -> None:
    meta = {HOP: {"chain": ["a", "b"], "max_hops": 5, "deadline": NOW + 3}}
    assert read_hop(meta, default_max_hops=6) == HopState(("a", "b"), 5, NOW + 3)


@pytest.mark.parametrize("sent", [5, 1e9, 10**30])
def test_a_caller_cannot_raise_the_nodes_hop_limit(sent: float) -> None:
    meta = {HOP: {"chain": ["a"], "max_hops": sent}}
    assert read_hop(meta, default_max_hops=4).max_hops == 4


def test_a_caller_may_lower_the_nodes_hop_limit() -> None:
    assert read_hop({HOP: {"chain": [], "max_hops": 2}}, default_max_hops=4).max_hops == 2


def test_whole_float_max_hops_from_protobuf_is_accepted() -> None:
    assert read_hop({HOP: {"chain": [], "max_hops": 3.0}}, default_max_hops=4).max_hops == 3


@pytest.mark.parametrize(
    "raw",
    [
        "a,b",
        {"chain": "a"},
        {"chain": [1, 2]},
        {"chain": [""]},
        {"chain": [], "max_hops": 0},
        {"chain": [], "max_hops": 2.5},
        {"chain": [], "max_hops": True},
        {"chain": [], "deadline": "soon"},
        {"chain": [], "deadline": math.nan},
    ],
)
def test_malformed_hop_metadata_is_a_violation(raw: object) -> None:
    with pytest.raises(ToolError, match="malformed hop metadata") as info:
        read_hop({HOP: raw}, default_max_hops=4)
    assert info.value.kind is ErrorKind.HOP_LIMIT


def test_a_loop_is_refused_and_named() -> None:
    error = hop_error(HopState(("a", "b"), 4, None), "a")
    assert str(error) == "loop: a → b → a"


def test_a_full_chain_is_refused() -> None:
    error = hop_error(HopState(("a", "b", "c"), 3, None), "d")
    assert "hop limit 3" in str(error)
    assert "a → b → c → d" in str(error)


def test_a_passed_deadline_is_refused() -> None:
    error = hop_error(HopState(("a",), 4, NOW - 2), "b")
    assert "deadline passed 2.0s ago" in str(error)


def test_a_fresh_message_passes() -> None:
    check_hop(HopState(("a", "b"), 4, NOW + 1), "c", NOW)
    check_hop(HopState((), 1, None), "a", NOW)


def test_forwarding_appends_self_and_keeps_the_limit() -> None:
    state = HopState(("a",), 4, None)
    hop = forward_metadata(state, "b", timeout_s=10, now=NOW)[HOP]
    assert hop == {"chain": ["a", "b"], "max_hops": 4, "deadline": NOW + 10}


def test_forwarding_never_extends_the_deadline() -> None:
    state = HopState(("a",), 4, NOW + 2)
    assert forward_metadata(state, "b", timeout_s=30, now=NOW)[HOP]["deadline"] == NOW + 2
    shorter = forward_metadata(state, "b", timeout_s=1, now=NOW)[HOP]["deadline"]
    assert shorter == NOW + 1


def test_forwarded_metadata_reads_back() -> None:
    meta = forward_metadata(HopState(), "a", timeout_s=5, now=NOW)
    assert read_hop(meta, default_max_hops=9) == HopState(("a",), 4, NOW + 5)


def test_remaining() -> None:
    assert remaining(HopState(), NOW) == math.inf
    assert remaining(HopState((), 4, NOW + 1.5), NOW) == 1.5
    assert remaining(HopState((), 4, NOW - 1), NOW) == 0.0
