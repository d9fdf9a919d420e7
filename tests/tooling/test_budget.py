from __future__ import annotations

import math

import pytest

from node.errors import BudgetExceeded
from node.tooling.budget import CostBudget


def test_charges_accumulate_until_the_limit() -> None:
    budget = CostBudget(1.0)
    budget.charge(0.25, "a")
    budget.charge(0.75, "b")
    assert budget.spent == 1.0
    assert budget.remaining == 0.0
    assert budget.exhausted


def test_an_overrun_is_refused_and_not_charged() -> None:
    budget = CostBudget(1.0)
    budget.charge(0.5)
    with pytest.raises(BudgetExceeded, match=r"search costs 0\.6 but only 0\.5 of 1 remains"):
        budget.charge(0.6, "search")
    assert budget.spent == 0.5
    assert not budget.exhausted


def test_unlimited_budget_only_counts() -> None:
    budget = CostBudget()
    budget.charge(1e9)
    assert budget.remaining == math.inf
    assert not budget.exhausted


def test_negative_amounts_are_bugs() -> None:
    with pytest.raises(ValueError, match="negative"):
        CostBudget(1).charge(-1)
    with pytest.raises(ValueError, match="negative"):
        CostBudget(-1)
