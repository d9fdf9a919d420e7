"""What the metrics hooks cost per task, in CPU time, without the rest of the node.

Run:

    .venv/bin/python bench/metrics_cost.py [--tasks 200000] [--repeat 5]

``bench/node_throughput.py`` compares a node with metrics on (b) and off (h) end to end, but on a
shared, loaded machine its rounds vary by more than the 3 % budget of issue 12. This script times
exactly the hooks one task of that benchmark runs (a lean-path ``calculate`` call): the executor's
two ``note_skill`` calls and ``requested_skill``, ``task_run`` around the run (tasks in flight up
and down, the task counter and duration histogram by skill and state), and the runner's
``tool_call`` (counter and histogram) — against the same calls with metrics off. It prints CPU
microseconds per task (best of ``--repeat``); divide by the server CPU ms per request of
``node_throughput.py`` for the share.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from a2a.types import TaskState

from node.observability.metrics import (
    MeteredUpdater,
    NodeMetrics,
    note_skill,
    requested_skill,
    task_run,
)
from node.planning import Request


class _Queue:
    async def enqueue_event(self, event: object) -> None:  # never called here
        return None


def one_pass(metrics: NodeMetrics | None, tasks: int) -> float:
    """CPU seconds for ``tasks`` tasks' worth of hooks."""
    request = Request(data=({"skill": "calculate", "arguments": {"expression": "1+1"}},))
    names = ("calculate",)
    start = time.process_time()
    for _ in range(tasks):
        updater = MeteredUpdater(_Queue(), "t", "c")  # type: ignore[arg-type]
        note_skill(updater, requested_skill(request))
        with task_run(metrics, updater):
            note_skill(updater, *names)
            if metrics is not None:
                metrics.tool_call("calculate", None, 0.0001)
            updater.state = TaskState.TASK_STATE_COMPLETED  # what update_status records
    return time.process_time() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    metrics = NodeMetrics(is_skill=lambda n: n == "calculate", is_tool=lambda n: n == "calculate")
    on = min(one_pass(metrics, args.tasks) for _ in range(args.repeat))
    off = min(one_pass(None, args.tasks) for _ in range(args.repeat))
    per_task = (on - off) / args.tasks * 1e6
    print(f"metrics on: {on / args.tasks * 1e6:.2f} us/task, off: {off / args.tasks * 1e6:.2f}")
    print(f"cost of the metrics hooks: {per_task:.2f} CPU us per task")
    for cpu_ms in (1.5, 3.5):
        print(f"  = {per_task / (cpu_ms * 1000) * 100:.2f} % of a task costing {cpu_ms} CPU ms")
    exposition = metrics.exposition()
    print(f"one scrape: {len(exposition)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
