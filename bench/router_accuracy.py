"""Accuracy of the model-free skill router on the labelled requests for the example cards.

Run: ``.venv/bin/python bench/router_accuracy.py`` (``--misses`` lists what it got wrong).

For each threshold (the default first) at the default margin, and for a few margins at the default
threshold: precision (runs that picked the labelled skill / all runs), recall (right runs / requests
labelled with a skill), abstain rate (input-required with candidates / all requests), and how often
the candidates of an abstention include the skill labelled ``offer``. The labelled set is
``tests/planning/router_labelled.yaml``; no node is started and nothing is timed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.planning.settings import RoutingSettings
from tests.planning.router_eval import evaluate, load_labelled

THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
MARGINS = (0.0, 0.1, 0.2, 0.3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--misses", action="store_true", help="list the misses at the default")
    args = parser.parse_args()
    default = RoutingSettings()
    labelled = load_labelled()
    print(f"{len(labelled)} labelled requests, {sum(i.expect == 'none' for i in labelled)} 'none'")
    print("threshold margin  precision  recall  abstain  offers  runs")
    rows = [(t, default.margin) for t in THRESHOLDS]
    rows += [(default.threshold, m) for m in MARGINS if m != default.margin]
    for threshold, margin in rows:
        s = evaluate(RoutingSettings(threshold=threshold, margin=margin), labelled)
        mark = "  ← default" if (threshold, margin) == (default.threshold, default.margin) else ""
        print(
            f"{threshold:9.2f} {margin:6.2f}  {s.precision:9.3f}  {s.recall:6.3f}  "
            f"{s.abstain_rate:7.3f}  {s.offer_rate:6.2f}  {s.runs:4d}{mark}"
        )
    if args.misses:
        for item, decision in evaluate(default, labelled).misses:
            got = decision.ran or f"none (offered {', '.join(decision.candidates)})"
            print(f"  [{item.card}] {item.text!r}: expected {item.expect}, got {got}")


if __name__ == "__main__":
    main()
