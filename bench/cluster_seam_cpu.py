"""Per-task server CPU on SQLite with the cluster seam (versioned store + event stream) on and off.

Run (alternates off/on, each in a fresh process; lean path off so every send takes the SDK path):

    .venv/bin/python bench/cluster_seam_cpu.py [--rounds 3] [--tasks 600]

Each process builds our node (built-in ``calculate``, store ``sqlite`` in a temp dir), warms up
with 50 blocking ``SendMessage`` calls, then sends ``--tasks`` more, 20 at a time, in-process
through ``httpx.ASGITransport`` and reports process CPU (all threads, the client included) per
task. "off" replaces ``node.server.app.cluster_for`` by one returning ``None`` (the node as it
was before the seam). Every answer is checked to be a COMPLETED task.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def body() -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "1+1"}}}],
            }
        },
    }


async def measure(mode: str, tasks: int) -> float:
    import httpx

    import node.server.app as appmod
    from node.card import parse_card

    if mode == "off":
        appmod.cluster_for = lambda *a, **k: None  # type: ignore[assignment]
    logging.disable(logging.WARNING)
    card = parse_card({"id": "b", "name": "b", "description": "b", "tools": ["calculate"]}, env={})
    app = appmod.build_node_app(
        card, public_url="http://n.test", data_dir=Path(tempfile.mkdtemp()), store="sqlite"
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        headers = {"A2A-Version": "1.0"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://n.test", headers=headers
        ) as c:

            async def one() -> None:
                r = await c.post("/", json=body())
                assert "TASK_STATE_COMPLETED" in r.text, r.text[:300]

            for _ in range(50):
                await one()
            start = time.process_time()
            for _ in range(tasks // 20):
                await asyncio.gather(*(one() for _ in range(20)))
            return (time.process_time() - start) * 1000 / (tasks // 20 * 20)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--child", choices=["on", "off"])
    args = parser.parse_args()
    if args.child:
        print(f"{asyncio.run(measure(args.child, args.tasks)):.3f}")
        return
    env = {**os.environ, "A2A_NODE_LEAN_PATH": "0", "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    results: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for mode in ("off", "on"):
            argv = [sys.executable, __file__, "--child", mode, "--tasks", str(args.tasks)]
            out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            results[mode].append(float(out.stdout.strip().splitlines()[-1]))
    medians = {mode: sorted(values)[len(values) // 2] for mode, values in results.items()}
    for mode, values in results.items():
        shown = " ".join(f"{v:.2f}" for v in values)
        print(f"seam {mode:3}: CPU ms/task {shown}  (median {medians[mode]:.2f})")
    print(f"on/off (medians): {medians['on'] / medians['off']:.3f}")


if __name__ == "__main__":
    main()
