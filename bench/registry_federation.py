"""What federation costs a search: one registry completing its listings from an upstream.

Run: ``.venv/bin/python bench/registry_federation.py`` (``--upstream-agents 100 --duration 5``).

1. A card server (in this process) and three registries, each its own process on a temporary
   SQLite file: B (the upstream) holds ``--upstream-agents`` agents, A (10 local agents) lists B
   as its upstream with the default 10 s answer cache, A0 the same with the cache off.
2. ``wrk`` (``bench/wrk/registry_queries.lua``: every answer must be a 200 listing) at 1 and 32
   connections, per kind of listing: A with ``scope=local``; A completed from B (cache warm);
   A0 completed from B (B asked on every request); B asked directly. Pages of 200 entries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.registry_search import (  # noqa: E402
    card_app,
    free_port,
    run_wrk,
    start_registry,
    wait_ready,
)
from node.registry import RegistrySettings  # noqa: E402
from node.registry.settings import FederationSettings, Upstream  # noqa: E402

LOCAL_AGENTS = 10


async def register(registry_url: str, cards_url: str, indices: range) -> None:
    async with httpx.AsyncClient(base_url=registry_url, timeout=30) as http:
        for i in indices:
            url = f"{cards_url}/agents/{i}/card.json"
            response = await http.post("/v1/agents", json={"card_url": url})
            response.raise_for_status()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream-agents", type=int, default=100)
    parser.add_argument("--duration", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("this benchmark needs wrk")
    tmp = Path(tempfile.mkdtemp(prefix="bench-federation-"))
    card_port = free_port()
    cards_url = f"http://127.0.0.1:{card_port}"
    loopback = ("127.0.0.0/8",)
    ports = {name: free_port() for name in ("b", "a", "a0")}
    urls = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    upstream = (Upstream(url=urls["b"]),)
    settings = {
        "b": RegistrySettings(port=ports["b"], db=str(tmp / "b.db"), allow_cidrs=loopback),
        "a": RegistrySettings(
            port=ports["a"],
            db=str(tmp / "a.db"),
            allow_cidrs=loopback,
            federation=FederationSettings(upstreams=upstream),
        ),
        "a0": RegistrySettings(
            port=ports["a0"],
            db=str(tmp / "a0.db"),
            allow_cidrs=loopback,
            federation=FederationSettings(upstreams=upstream, cache_s=0),
        ),
    }
    server = uvicorn.Server(
        uvicorn.Config(card_app(cards_url), port=card_port, log_level="warning", lifespan="off")
    )
    card_task = asyncio.create_task(server.serve())
    procs = {name: start_registry(s) for name, s in settings.items()}
    try:
        for url in urls.values():
            await wait_ready(f"{url}/healthz")
        await register(
            urls["b"], cards_url, range(LOCAL_AGENTS, LOCAL_AGENTS + args.upstream_agents)
        )
        await register(urls["a"], cards_url, range(LOCAL_AGENTS))
        await register(urls["a0"], cards_url, range(LOCAL_AGENTS))
        page = "/v1/agents?page_size=200"
        kinds = {
            "A, scope=local (10 agents)": (urls["a"], f"{page}&scope=local"),
            "A + B, cache warm": (urls["a"], page),
            "A0 + B, cache off (B asked each time)": (urls["a0"], page),
            "B directly": (urls["b"], page),
        }
        async with httpx.AsyncClient() as http:  # every kind answers the expected count
            for name, (url, path) in kinds.items():
                count = len((await http.get(url + path)).json()["agents"])
                print(f"{name}: {count} agents per page")
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print("| listing | c=1 p50 | c=1 p99 | c=32 req/s | c=32 p50 | c=32 p99 |")
        print("|---|---|---|---|---|---|")
        for name, (url, path) in kinds.items():
            one = run_wrk(url, [path], connections=1, duration=args.duration)
            many = run_wrk(url, [path], connections=32, duration=args.duration)
            print(
                f"| {name} | {one['p50']:.1f} ms | {one['p99']:.1f} ms | {many['rps']:.0f} | "
                f"{many['p50']:.1f} ms | {many['p99']:.1f} ms |"
            )
        print(f"load average after: {os.getloadavg()[0]:.1f}")
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            proc.wait(timeout=60)
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await card_task
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
