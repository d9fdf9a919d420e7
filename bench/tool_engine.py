"""Micro-benchmark of the tool engine's hot path: prepare_call and the runner.

Run: ``.venv/bin/python bench/tool_engine.py`` (add ``--quick`` for a fast smoke run).
Each figure is the best of several rounds of many iterations, timed with ``time.perf_counter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.errors import InvalidArguments
from node.tooling import Tool, Toolbox, ToolCall, ToolContext, ToolPolicy, ToolRunner


class Reference(Tool):
    """Six parameters of every common kind; a trivial async body."""

    name = "reference"
    description = "A reference tool for benchmarks."
    policy = ToolPolicy(read_only=True)
    parameters = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "threshold": {"type": "number", "minimum": 0, "maximum": 1},
            "verbose": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
            "options": {
                "type": "object",
                "properties": {
                    "mode": {"enum": ["fast", "balanced", "exact"]},
                    "depth": {"type": "integer", "minimum": 0, "maximum": 5},
                },
                "additionalProperties": False,
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    async def execute(self, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        return arguments["query"]


TYPED = {
    "query": "find me",
    "limit": 10,
    "threshold": 0.5,
    "verbose": True,
    "tags": ["a", "b"],
    "options": {"mode": "fast", "depth": 2},
}
STRINGS = {
    "query": "find me",
    "limit": "10",
    "threshold": "0.5",
    "verbose": "true",
    "tags": ["a", "b"],
    "options": {"mode": "fast", "depth": "2"},
}
PAYLOAD = json.dumps(TYPED)
INVALID = {**TYPED, "options": {"mode": "fast", "depth": 9}}


def best_per_call(fn: Callable[[], object], iterations: int, rounds: int) -> float:
    """Best seconds per call over ``rounds`` rounds of ``iterations`` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


async def best_per_call_async(
    fn: Callable[[], Awaitable[object]], iterations: int, rounds: int, per: int = 1
) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iterations):
            await fn()
        best = min(best, (time.perf_counter() - start) / (iterations * per))
    return best


def report(label: str, seconds: float, target_us: float | None = None) -> None:
    verdict = ""
    if target_us is not None:
        verdict = (
            f"  target ≤ {target_us:g} µs: {'met' if seconds * 1e6 <= target_us else 'MISSED'}"
        )
    print(f"{label:<42} {1 / seconds:>12,.0f} calls/s {seconds * 1e6:>8.2f} µs/call{verdict}")


def main() -> None:
    quick = "--quick" in sys.argv
    n, rounds = (2_000, 3) if quick else (50_000, 7)
    registry = Toolbox([Reference()])
    prepare = registry.prepare_call

    def invalid() -> None:
        with contextlib.suppress(InvalidArguments):
            prepare("reference", INVALID)

    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    report(
        "prepare_call, typed arguments",
        best_per_call(lambda: prepare("reference", TYPED), n, rounds),
        4,
    )
    report(
        "prepare_call, string scalars to cast",
        best_per_call(lambda: prepare("reference", STRINGS), n, rounds),
    )
    report(
        "prepare_call, JSON-string payload",
        best_per_call(lambda: prepare("reference", PAYLOAD), n, rounds),
    )
    report("prepare_call, invalid arguments", best_per_call(invalid, n, rounds))

    runner = ToolRunner(registry)
    ctx = ToolContext()
    one = [ToolCall("reference", TYPED, "c1")]
    eight = [ToolCall("reference", TYPED, f"c{i}") for i in range(8)]

    async def bench_runner() -> tuple[float, float]:
        assert (await runner.run(one, ctx))[0].ok
        single = await best_per_call_async(lambda: runner.run(one, ctx), n, rounds)
        batch = await best_per_call_async(lambda: runner.run(eight, ctx), n // 8, rounds, per=8)
        return single, batch

    single, batch = asyncio.run(bench_runner())
    report("full execute, sequential (run of 1 call)", single, 12)
    report("full execute, batches of 8 safe calls", batch)


if __name__ == "__main__":
    main()
