"""A task's cost envelope: tools charge it before they run, and it refuses what would exceed it."""

from __future__ import annotations

import math

from node.errors import BudgetExceeded

__all__ = ["CostBudget"]


class CostBudget:
    """Tracks spending against an optional ``limit`` (``None``: unlimited)."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: float | None = None) -> None:
        if limit is not None and limit < 0:
            raise ValueError("a cost limit cannot be negative")
        self.limit = limit
        self.spent = 0.0

    @property
    def remaining(self) -> float:
        return math.inf if self.limit is None else max(self.limit - self.spent, 0.0)

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.spent >= self.limit

    def charge(self, amount: float, what: str = "call") -> None:
        """Record ``amount``; raise :class:`BudgetExceeded`, charging nothing, if it won't fit."""
        if amount < 0:
            raise ValueError("a cost cannot be negative")
        if self.limit is not None and self.spent + amount > self.limit + 1e-12:
            raise BudgetExceeded(
                f"cost budget exceeded: {what} costs {amount:g} but only "
                f"{self.remaining:g} of {self.limit:g} remains"
            )
        self.spent += amount

    def __repr__(self) -> str:
        return f"CostBudget(limit={self.limit!r}, spent={self.spent!r})"
