"""Network latency: one skill called directly vs one hop away; registry search, 10,000 agents.

Run: ``.venv/bin/python bench/network.py`` (``--calls 50 --agents 1000`` for a quick run).

(a) ``calculate`` sent straight to the data node, and (b) the coordinator's ``compute`` pipeline,
which forwards the same call to the data node (coordinator → data, the official a2a-sdk client
inside the coordinator). Both run in the same network, started like ``a2a-node up`` (a registry,
the data node and the coordinator from ``cards/``, each its own process on 127.0.0.1), with
sequential blocking ``SendMessage`` calls over raw httpx JSON-RPC, (a) and (b) alternating so
drift hits both alike. Run once per task store (``--stores``). Target: (b)/(a) p50 ≤ 2.0×
(issue 13; it was 2.5×). Beside the latencies, the CPU each node process spent per call (from
``/proc``, so a loaded machine does not inflate it the way it inflates latency).

(c) Registry search latency with 10,000 registered agents, reusing ``bench/registry_search.py``
(cards served from this process, each registered through ``POST /v1/agents``; ``wrk -c1`` per
query kind when wrk is installed, sequential httpx otherwise). Target: p50 ≤ 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import registry_search  # noqa: E402

from node.network.launcher import Network  # noqa: E402
from node.network.spec import NetworkSpec, NodeSpec, RegistrySpec  # noqa: E402
from node.registry import RegistrySettings  # noqa: E402

HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def _body(skill: str, arguments: dict[str, Any], i: int) -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": skill, "arguments": arguments}}],
    }
    return {"jsonrpc": "2.0", "id": i, "method": "SendMessage", "params": {"message": message}}


async def _call(http: httpx.AsyncClient, url: str, skill: str, i: int) -> tuple[float, str]:
    """One blocking SendMessage; (seconds, final state)."""
    body = _body(skill, {"expression": f"{i} * 7 + 1"}, i)
    started = time.perf_counter()
    response = await http.post(url + "/", json=body, headers=HEADERS)
    elapsed = time.perf_counter() - started
    result = response.json().get("result", {})
    return elapsed, result.get("task", {}).get("status", {}).get("state", str(response.json()))


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``, 100 Hz ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _coordinator_card(path: str, directory: Path) -> str:
    """``cards/coordinator.yaml`` for ``--coordinator-path``: as is (lean) or with it off (sdk)."""
    card = ROOT / "cards/coordinator.yaml"
    if path == "lean":
        return str(card)
    if path != "sdk":
        raise SystemExit(f"--coordinator-path takes lean and/or sdk, not {path!r}")
    data = yaml.safe_load(card.read_text())
    data.setdefault("server", {})["lean_path"] = False
    copy = directory / "coordinator-sdk-path.yaml"
    copy.write_text(yaml.safe_dump(data))
    return str(copy)


async def hop_latency(
    store: str, calls: int, warmup: int, coordinator_path: str = "lean"
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Start registry + data + coordinator, wait until the coordinator can reach data, measure.

    Returns the latencies per kind and, per kind, the CPU seconds each node process spent
    during those calls (the ticks that fell inside the kind's calls, summed: unbiased over
    hundreds of calls although one tick is 10 ms).
    """
    reg, data, coord = (registry_search.free_port() for _ in range(3))
    with tempfile.TemporaryDirectory() as tmp:
        coordinator_card = _coordinator_card(coordinator_path, Path(tmp))
        spec = NetworkSpec(
            startup_timeout_s=300,  # a loaded machine starts three processes slowly
            registry=RegistrySpec(port=reg),
            nodes=[
                NodeSpec(card=str(ROOT / "cards/data.yaml"), port=data, store=store),
                NodeSpec(card=coordinator_card, port=coord, store=store),
            ],
        )
        network = Network(spec, spec_dir=ROOT, run_dir=Path(tmp), log_level="warning")
        await network.start()
        try:
            data_url, coord_url = f"http://127.0.0.1:{data}", f"http://127.0.0.1:{coord}"
            async with httpx.AsyncClient(timeout=30.0) as http:
                deadline = time.monotonic() + 60  # the coordinator refreshes its peers periodically
                while (await _call(http, coord_url, "compute", 0))[1] != "TASK_STATE_COMPLETED":
                    if time.monotonic() > deadline:
                        raise SystemExit("the coordinator never reached the data node")
                    await asyncio.sleep(0.2)
                samples: dict[str, list[float]] = {"direct": [], "one hop": []}
                pids = {m.url: m.child.pid for m in network.members if m.child.pid is not None}
                procs = {"data": pids[data_url], "coordinator": pids[coord_url]}
                cpu = {kind: dict.fromkeys(procs, 0.0) for kind in samples}
                print(f"    measuring (pids {procs})", flush=True)
                for i in range(warmup + calls):
                    for kind, url, skill in (
                        ("direct", data_url, "calculate"),
                        ("one hop", coord_url, "compute"),
                    ):
                        before = {name: _cpu_s(pid) for name, pid in procs.items()}
                        elapsed, state = await _call(http, url, skill, i)
                        if state != "TASK_STATE_COMPLETED":
                            raise SystemExit(f"{kind} call {i} ended {state}")
                        if i >= warmup:
                            samples[kind].append(elapsed)
                            for name, pid in procs.items():
                                cpu[kind][name] += _cpu_s(pid) - before[name]
            return samples, cpu
        finally:
            await network.stop()


async def search_latency(agents: int, duration: int) -> None:
    """(c): the registry with ``agents`` registered; p50/p99 per query kind."""
    rs = registry_search
    cards_port, registry_port = rs.free_port(), rs.free_port()
    cards_url = f"http://127.0.0.1:{cards_port}"
    config = uvicorn.Config(
        rs.card_app(cards_url), port=cards_port, log_level="warning", lifespan="off", ws="none"
    )
    card_server = uvicorn.Server(config)
    card_task = asyncio.create_task(card_server.serve())
    use_wrk = shutil.which("wrk") is not None
    with tempfile.TemporaryDirectory() as tmp:
        settings = RegistrySettings(
            port=registry_port,
            db=str(Path(tmp) / "registry.db"),
            allow_cidrs=("127.0.0.0/8",),
            ttl_s=3600,
        )
        registry = rs.start_registry(settings)
        try:
            await rs.wait_ready(settings.base_url + "/healthz")
            await rs.wait_ready(cards_url + "/agents/0/card.json")
            fill_s = await rs.fill(settings.base_url, cards_url, agents, 16)
            tool = "wrk -t1 -c1" if use_wrk else "httpx, sequential"
            print(f"\n(c) registry search, {agents} agents (filled in {fill_s:.1f} s), {tool}")
            print(f"    {'query kind':<18}{'p50 ms':>8}{'p99 ms':>8}{'req/s':>8}")
            for kind, paths in rs.queries().items():
                if use_wrk:
                    r = rs.run_wrk(settings.base_url, paths, connections=1, duration=duration)
                else:
                    r = await rs.run_httpx(settings.base_url, paths, duration=duration)
                print(f"    {kind:<18}{r['p50']:>8.2f}{r['p99']:>8.2f}{r['rps']:>8.0f}")
        finally:
            registry.send_signal(signal.SIGTERM)
            registry.wait(timeout=30)
            card_server.should_exit = True
            await card_task


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per kind")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--stores", default="sqlite,memory", help="task stores to run with")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--duration", type=int, default=5, help="seconds per search query kind")
    parser.add_argument("--skip-search", action="store_true")
    parser.add_argument(
        "--coordinator-path",
        default="lean",
        help="lean (the card as is), sdk (the coordinator's lean path off), or lean,sdk",
    )
    args = parser.parse_args()
    os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"(a)/(b): {args.calls} sequential SendMessage calls each (raw httpx JSON-RPC), "
          f"after {args.warmup} warm-up calls")  # fmt: skip
    for store, path in itertools.product(args.stores.split(","), args.coordinator_path.split(",")):
        load = _load()
        samples, cpu = await hop_latency(store, args.calls, args.warmup, path)
        direct, hop = samples["direct"], samples["one hop"]
        print(f"\n  store {store}, coordinator path {path} ({load} before)")
        print(f"    {'':<36}{'p50 ms':>8}{'p99 ms':>8}{'mean ms':>9}"
              f"{'data CPU':>10}{'coord CPU':>11}  (ms per call)")  # fmt: skip
        for label, kind, values in (
            ("(a) data: calculate, direct", "direct", direct),
            ("(b) coordinator: compute → data", "one hop", hop),
        ):
            mean = statistics.fmean(values) * 1000
            data_ms, coord_ms = (cpu[kind][n] * 1000 / len(values) for n in ("data", "coordinator"))
            print(f"    {label:<36}{_pct(values, 0.5):>8.2f}{_pct(values, 0.99):>8.2f}{mean:>9.2f}"
                  f"{data_ms:>10.2f}{coord_ms:>11.2f}")  # fmt: skip
        ratio = _pct(hop, 0.5) / _pct(direct, 0.5)
        print(
            f"    ratio (b)/(a) p50: {ratio:.2f}x (target <= 2.0x, issue 13; load "
            "%.2f %.2f %.2f after)" % os.getloadavg()
        )
    if not args.skip_search:
        await search_latency(args.agents, args.duration)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
