"""What the call records (``a2a_node_calls``, issue 12) cost a one-call task, in CPU time.

Run:

    .venv/bin/python bench/call_records.py [--tasks 2000] [--rounds 4]

One node (the data card, built-in ``calculate``, store ``memory``, lean path on) runs in this
process behind ``httpx.ASGITransport`` (no socket); each round sends ``--tasks`` blocking
``SendMessage`` requests over HTTP+JSON (a data part ``{"skill": "calculate", ...}``) twice: once
as built, once with the executor's call log switched off (``node.executor.calls_of`` → None: no
records, no status metadata). The order alternates per round. The figure is process CPU time per
request (``time.process_time``: client and server together, as both run here), which a busy
machine inflates less than wall time; the difference between the two is what the records cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import yaml  # noqa: E402

import node.executor  # noqa: E402
from node.card import parse_card  # noqa: E402
from node.server.app import build_node_app  # noqa: E402

BODY = {"skill": "calculate", "arguments": {"expression": "1+1"}}


async def cpu_per_request(tasks: int, records: bool) -> float:
    """Process CPU µs per request over ``tasks`` requests (after 50 discarded)."""
    saved = node.executor.calls_of
    if not records:
        node.executor.calls_of = lambda updater: None  # type: ignore[assignment]
    try:
        data = yaml.safe_load((ROOT / "cards" / "data.yaml").read_text(encoding="utf-8"))
        data["tools"] = ["calculate"]
        with tempfile.TemporaryDirectory() as tmp:
            app = build_node_app(
                parse_card(data), public_url="http://b.test", data_dir=tmp, store="memory"
            )
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://b.test") as http:

                    async def send() -> None:
                        message = {
                            "messageId": uuid.uuid4().hex,
                            "role": "ROLE_USER",
                            "parts": [{"data": BODY}],
                        }
                        response = await http.post(
                            "/rest/message:send",
                            json={"message": message},
                            headers={"A2A-Version": "1.0"},
                        )
                        task: dict[str, Any] = response.json()["task"]
                        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
                        assert ("metadata" in task) is records, task

                    for _ in range(50):
                        await send()
                    start = time.process_time()
                    for _ in range(tasks):
                        await send()
                    return (time.process_time() - start) / tasks * 1e6
    finally:
        node.executor.calls_of = saved


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with_records: list[float] = []
    without: list[float] = []
    for n in range(args.rounds):
        order = (True, False) if n % 2 == 0 else (False, True)
        for records in order:
            us = await cpu_per_request(args.tasks, records)
            (with_records if records else without).append(us)
            print(f"round {n + 1}: records {'on ' if records else 'off'} {us:7.1f} µs CPU/request")
    on, off = statistics.median(with_records), statistics.median(without)
    print(f"median: on {on:.1f} µs, off {off:.1f} µs, records cost {on - off:+.1f} µs/request")


if __name__ == "__main__":
    asyncio.run(main())
