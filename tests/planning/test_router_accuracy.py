"""The skill router on the labelled requests for the example cards, at the card defaults.

Floors (measured figures in bench/RESULTS.md, ``bench/router_accuracy.py``): precision ≥ 0.90 (a
run skill is the right one), recall ≥ 0.75 (a request that names a skill's job runs it), and every
abstention on a request for a skill a guess must not run still offers that skill.
"""

from __future__ import annotations

from node.planning.settings import RoutingSettings
from tests.planning.router_eval import evaluate, load_labelled

PRECISION_FLOOR = 0.90
RECALL_FLOOR = 0.75


def test_the_labelled_set_covers_every_example_card_with_at_least_60_requests() -> None:
    labelled = load_labelled()
    assert len(labelled) >= 60
    assert {item.card for item in labelled} == {"coordinator", "data", "files", "text", "web"}
    assert sum(item.expect == "none" for item in labelled) >= 15


def test_the_router_clears_its_documented_floors_at_the_default_threshold() -> None:
    scores = evaluate(RoutingSettings())
    wrong = [(m.text, d.ran) for m, d in scores.misses if d.ran is not None]
    assert scores.precision >= PRECISION_FLOOR, wrong
    assert scores.recall >= RECALL_FLOOR, [m.text for m, _ in scores.misses]
    assert scores.offer_rate == 1.0


def test_a_threshold_of_one_never_runs_anything() -> None:
    scores = evaluate(RoutingSettings(threshold=1.0))
    assert scores.runs == 0 and scores.abstain_rate == 1.0
