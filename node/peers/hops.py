"""The hop guard: loop, hop-count and deadline checks for forwarded messages (pure functions).

A forwarded message carries ``metadata[node.protocol.HOP] = {"chain": [agent_id, ...],
"max_hops": int, "deadline": epoch_s}``. A node refuses a message whose chain already holds its
own id (a loop), whose chain reached ``max_hops``, or whose deadline passed; when it forwards, it
appends itself and passes on the remaining time, never more.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.errors import HopLimitExceeded
from node.protocol import HOP

__all__ = ["HopState", "check_hop", "forward_metadata", "read_hop", "remaining"]


@dataclass(frozen=True, slots=True)
class HopState:
    """Where a message has been, how far it may go, and until when (epoch seconds)."""

    chain: tuple[str, ...] = ()
    max_hops: int = 4
    deadline: float | None = None


def _violation(message: str) -> HopLimitExceeded:
    return HopLimitExceeded(message)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_hop(metadata: Mapping[str, Any] | None, *, default_max_hops: int) -> HopState:
    """Read the hop state of a message's metadata; no hop entry means a fresh chain.

    ``default_max_hops`` is the node's own limit: a sender's ``max_hops`` can only lower it.

    Malformed hop metadata is a violation (:class:`HopLimitExceeded`).
    """
    raw = (metadata or {}).get(HOP)
    if raw is None:
        return HopState((), default_max_hops, None)
    if not isinstance(raw, Mapping):
        raise _violation(f"malformed hop metadata: expected an object, got {type(raw).__name__}")
    chain = raw.get("chain", [])
    if not isinstance(chain, list | tuple) or not all(isinstance(a, str) and a for a in chain):
        raise _violation("malformed hop metadata: 'chain' must be a list of agent ids")
    max_hops = raw.get("max_hops", default_max_hops)
    if not _is_number(max_hops) or max_hops != int(max_hops) or max_hops < 1:
        raise _violation("malformed hop metadata: 'max_hops' must be a positive integer")
    deadline = raw.get("deadline")
    if deadline is not None and (not _is_number(deadline) or not math.isfinite(deadline)):
        raise _violation("malformed hop metadata: 'deadline' must be epoch seconds")
    # a caller may lower the node's own hop limit, never raise it
    limit = min(int(max_hops), default_max_hops)
    return HopState(tuple(chain), limit, None if deadline is None else float(deadline))


def check_hop(state: HopState, self_id: str, now: float) -> None:
    """Raise :class:`HopLimitExceeded` when ``self_id`` may not handle this message."""
    path = " → ".join((*state.chain, self_id))
    if self_id in state.chain:
        raise _violation(f"loop: {path}")
    if len(state.chain) >= state.max_hops:
        raise _violation(f"hop limit {state.max_hops} reached: {path}")
    if state.deadline is not None and now >= state.deadline:
        raise _violation(f"deadline passed {now - state.deadline:.1f}s ago: {path}")


def remaining(state: HopState, now: float) -> float:
    """Seconds left before the deadline (``math.inf`` without one, never negative)."""
    return math.inf if state.deadline is None else max(0.0, state.deadline - now)


def forward_metadata(
    state: HopState, self_id: str, *, timeout_s: float, now: float
) -> dict[str, Any]:
    """The hop metadata for a message ``self_id`` forwards: itself appended, time never extended."""
    deadline = min(math.inf if state.deadline is None else state.deadline, now + timeout_s)
    return {
        HOP: {"chain": [*state.chain, self_id], "max_hops": state.max_hops, "deadline": deadline}
    }
