"""Scoring the skill router on the labelled requests (router_labelled.yaml) for the example cards.

Shared by ``test_router_accuracy.py`` and ``bench/router_accuracy.py``; no node is started: each
card's public skills are assembled as a node would, and :class:`TextRouting` decides.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from node.card import load_card
from node.planning import NeedsChoice, NeedsInput, TextRouting
from node.planning.settings import RoutingSettings
from node.server.assembly import assemble_tools
from node.tooling import Tool

ROOT = Path(__file__).resolve().parents[2]
LABELLED = Path(__file__).with_name("router_labelled.yaml")
_CARD_ENV = {"FILES_NODE_ADMIN_TOKEN": "admin-token-x", "FILES_NODE_READER_TOKEN": "reader-token-x"}


@dataclass(frozen=True, slots=True)
class Labelled:
    card: str
    text: str
    expect: str  # a skill id, or "none"
    offer: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    ran: str | None
    candidates: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Scores:
    total: int
    runs: int
    correct: int
    expected_runs: int
    abstained: int
    offers: int
    offers_found: int
    misses: tuple[tuple[Labelled, Decision], ...]

    @property
    def precision(self) -> float:
        return self.correct / self.runs if self.runs else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.expected_runs if self.expected_runs else 1.0

    @property
    def abstain_rate(self) -> float:
        return self.abstained / self.total

    @property
    def offer_rate(self) -> float:
        return self.offers_found / self.offers if self.offers else 1.0


def load_labelled(path: Path = LABELLED) -> list[Labelled]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Labelled(**entry) for entry in data["requests"]]


@functools.cache
def card_skills(card_id: str) -> Mapping[str, Tool]:
    """The public skills of ``cards/<card_id>.yaml`` (tools assembled in a scratch folder)."""
    card = load_card(ROOT / "cards" / f"{card_id}.yaml", env=_CARD_ENV)
    scratch = Path(tempfile.mkdtemp(prefix="router-eval-"))
    return assemble_tools(card, scratch, ()).skills()


def decide(routing: TextRouting, text: str, skills: Mapping[str, Tool]) -> Decision:
    """Which skill the router runs for ``text`` (asking for its arguments counts), or its offer."""
    try:
        call = routing.plan(text, skills)
    except NeedsChoice as choice:
        return Decision(None, tuple(c["skill"] for c in choice.candidates))
    except NeedsInput as needs:  # the routed skill asks for what the text lacks
        return Decision(needs.skill, ())
    return Decision(call.name, ())


def evaluate(settings: RoutingSettings, labelled: list[Labelled] | None = None) -> Scores:
    """Run the router on every labelled request with ``settings`` and count the outcomes."""
    labelled = load_labelled() if labelled is None else labelled
    routers: dict[str, TextRouting] = {}
    runs = correct = abstained = offers = offers_found = 0
    misses: list[tuple[Labelled, Decision]] = []
    for item in labelled:
        routing = routers.setdefault(item.card, TextRouting(settings))
        decision = decide(routing, item.text, card_skills(item.card))
        if decision.ran is None:
            abstained += 1
        else:
            runs += 1
            correct += decision.ran == item.expect
        if item.offer is not None:
            offers += 1
            offers_found += item.offer in decision.candidates
        if (decision.ran or "none") != item.expect:
            misses.append((item, decision))
    return Scores(
        total=len(labelled),
        runs=runs,
        correct=correct,
        expected_runs=sum(item.expect != "none" for item in labelled),
        abstained=abstained,
        offers=offers,
        offers_found=offers_found,
        misses=tuple(misses),
    )
