"""Registry search latency with 10,000 agents, over real HTTP.

Run: ``.venv/bin/python bench/registry_search.py`` (``--agents 1000 --duration 2`` for a quick run).

1. Starts a card server (in this process) that serves 10,000 generated agent cards with varied
   names, skills and tags, and the registry (``serve_registry``) in its own process on a temporary
   SQLite file.
2. Registers every agent through ``POST /v1/agents`` (so the registry fetches and validates each
   card, exactly like production), timing the fill.
3. Measures ``GET /v1/agents`` latency (p50/p99) per query kind — skill, tag, q, combined, and the
   unfiltered first page — with ``wrk`` at concurrency 1 (a Lua script cycles through many
   distinct queries), then throughput with 32 connections over the mixed set. Without ``wrk`` it
   falls back to sequential httpx calls (whose figures include the Python client's own cost).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node.registry import RegistrySettings  # noqa: E402

WORDS = {  # vocabulary for names, descriptions and skills
    "adjectives": "swift quiet bright clever rapid gentle bold calm eager fancy grand happy keen",
    "nouns": "translator planner scraper summariser calculator indexer router tagger parser",
    "verbs": "translate summarise extract classify rank search convert plan route parse tag map",
    "objects": "text pages invoices images tables emails logs code tickets events orders",
}
ADJECTIVES, NOUNS, VERBS, OBJECTS = (words.split() for words in WORDS.values())
TAGS = [f"tag{i}" for i in range(60)] + ["math", "nlp", "vision", "finance", "search", "web"]
SKILLS = [f"{v}-{o}" for v in VERBS for o in OBJECTS]  # 132 skill ids


def make_card(i: int, base_url: str) -> dict[str, Any]:
    rnd = random.Random(i)
    name = f"{rnd.choice(ADJECTIVES).title()} {rnd.choice(NOUNS).title()} {i:05d}"
    skills = []
    for skill_id in rnd.sample(SKILLS, rnd.randint(1, 4)):
        verb, obj = skill_id.split("-")
        skills.append(
            {
                "id": skill_id,
                "name": f"{verb.title()} {obj}",
                "description": f"{verb.title()}s {obj} for {rnd.choice(NOUNS)} workflows",
                "tags": rnd.sample(TAGS, rnd.randint(1, 3)),
            }
        )
    return {
        "name": name,
        "description": f"A {rnd.choice(ADJECTIVES)} agent that works on {rnd.choice(OBJECTS)}",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"{base_url}/agents/{i}",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }


def queries(seed: int = 7) -> dict[str, list[str]]:
    rnd = random.Random(seed)
    words = ADJECTIVES + NOUNS + VERBS + OBJECTS

    def path(**params: str) -> str:
        return "/v1/agents?" + urlencode(params)

    n = 64
    return {
        "skill": [path(skill=rnd.choice(SKILLS)) for _ in range(n)],
        "tag": [path(tag=rnd.choice(TAGS)) for _ in range(n)],
        "q": [path(q=rnd.choice(words)[: rnd.randint(3, 6)]) for _ in range(n)],
        "combined": [
            path(skill=rnd.choice(SKILLS), tag=rnd.choice(TAGS), q=rnd.choice(words)[:3])
            for _ in range(n)
        ]
        + [path(tag=rnd.choice(TAGS), q=rnd.choice(words), healthy="true") for _ in range(n)],
        "all (first page)": [path()],
        "q, no match": [path(q=f"zz{i}qq") for i in range(n)],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def card_app(base_url: str) -> Starlette:
    cache: dict[int, Response] = {}

    async def card(request: Request) -> Response:
        i = int(request.path_params["i"])
        if i not in cache:
            cache[i] = JSONResponse(make_card(i, base_url))
        return cache[i]

    return Starlette(routes=[Route("/agents/{i:int}/card.json", card)])


def start_registry(settings: RegistrySettings) -> subprocess.Popen[bytes]:
    script = (
        "import asyncio, sys\n"
        "from node.registry import RegistrySettings, serve_registry\n"
        "asyncio.run(serve_registry(RegistrySettings.model_validate_json(sys.argv[1])))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    return subprocess.Popen(
        [sys.executable, "-c", script, settings.model_dump_json()],
        env=env,
        stderr=subprocess.DEVNULL,
    )


def stop_registry(registry: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not stopped within a minute (e.g. still loading)."""
    registry.send_signal(signal.SIGTERM)
    try:
        registry.wait(timeout=60)
    except subprocess.TimeoutExpired:
        registry.kill()
        registry.wait()


async def wait_ready(url: str, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} not ready after {timeout_s}s")
            await asyncio.sleep(0.05)


async def fill(registry_url: str, cards_url: str, agents: int, concurrency: int) -> float:
    todo = iter(range(agents))
    async with httpx.AsyncClient(base_url=registry_url, timeout=30) as http:

        async def worker() -> None:
            for i in todo:
                url = f"{cards_url}/agents/{i}/card.json"
                response = await http.post("/v1/agents", json={"card_url": url})
                if response.status_code not in (200, 201):
                    raise RuntimeError(f"registering {url}: {response.status_code} {response.text}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


WRK_SCRIPT = ROOT / "bench" / "wrk" / "registry_queries.lua"


def run_wrk(url: str, paths: list[str], *, connections: int, duration: int) -> dict[str, float]:
    """``wrk`` over ``paths`` in rotation (``bench/wrk/registry_queries.lua``, which checks
    every answer is a 200 listing): requests/s, latency p50/p99 in ms, and socket errors
    (a request unanswered after 30 s counts as a timeout; any answer but a 200 listing raises)."""
    with tempfile.NamedTemporaryFile("w", suffix=".paths", delete=False) as listing:
        listing.write("\n".join(paths) + "\n")
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{duration}s", "--timeout", "30s",
             "--latency", "-s", str(WRK_SCRIPT), url, "--", listing.name],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    finally:
        os.unlink(listing.name)
    check = re.search(r"REGISTRY-CHECK ok=(\d+) bad_status=(\d+) bad_body=(\d+)", out)
    if check is None or int(check[1]) == 0 or int(check[2]) or int(check[3]):
        raise RuntimeError(f"wrk saw failed requests:\n{out}")
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    result = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}  # type: ignore[union-attr]
    for pct in ("50", "99"):
        value, unit = re.search(rf"\s{pct}%\s+([\d.]+)(us|ms|s)\b", out).groups()  # type: ignore[union-attr]
        result[f"p{pct}"] = float(value) * _UNITS[unit]
    result["errors"] = sum(int(n) for n in errors.groups()) if errors else 0
    result["requests"] = int(check[1])
    return result


async def run_httpx(url: str, paths: list[str], *, duration: float) -> dict[str, float]:
    times: list[float] = []
    async with httpx.AsyncClient(base_url=url) as http:
        end = time.perf_counter() + duration
        i = 0
        while time.perf_counter() < end:
            start = time.perf_counter()
            response = await http.get(paths[i % len(paths)])
            times.append((time.perf_counter() - start) * 1000)
            response.raise_for_status()
            i += 1
    times.sort()
    return {
        "rps": len(times) / duration,
        "p50": statistics.median(times),
        "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
    }


async def matches(url: str, paths: list[str]) -> float:
    """Mean number of agents on the first page of each query (shows the queries select)."""
    async with httpx.AsyncClient(base_url=url) as http:
        counts = [len((await http.get(p)).json()["agents"]) for p in paths[:32]]
    return statistics.mean(counts)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run")
    parser.add_argument("--fill-concurrency", type=int, default=16)
    args = parser.parse_args()
    use_wrk = shutil.which("wrk") is not None

    cards_port, registry_port = free_port(), free_port()
    cards_url = f"http://127.0.0.1:{cards_port}"
    config = uvicorn.Config(
        card_app(cards_url), port=cards_port, log_level="warning", lifespan="off", ws="none"
    )
    card_server = uvicorn.Server(config)
    card_task = asyncio.create_task(card_server.serve())
    with tempfile.TemporaryDirectory() as tmp:
        settings = RegistrySettings(
            port=registry_port,
            db=str(Path(tmp) / "registry.db"),
            allow_cidrs=("127.0.0.0/8",),
            ttl_s=3600,
        )
        registry = start_registry(settings)
        try:
            await wait_ready(settings.base_url + "/healthz")
            await wait_ready(cards_url + "/agents/0/card.json")
            fill_s = await fill(settings.base_url, cards_url, args.agents, args.fill_concurrency)
            print(
                f"filled {args.agents} agents via POST /v1/agents in {fill_s:.1f} s "
                f"({args.agents / fill_s:.0f} registrations/s, concurrency {args.fill_concurrency})"
            )
            tool = "wrk -t1 -c1" if use_wrk else "httpx sequential"
            print(f"\nsearch latency, {tool}, {args.duration:g} s per kind, page_size 50")
            print(f"{'query kind':<18}{'p50 ms':>8}{'p99 ms':>8}{'req/s':>8}{'hits/page':>11}")
            mixed: list[str] = []
            for kind, paths in queries().items():
                mixed += paths
                if use_wrk:
                    r = run_wrk(settings.base_url, paths, connections=1, duration=args.duration)
                else:
                    r = await run_httpx(settings.base_url, paths, duration=args.duration)
                hits = await matches(settings.base_url, paths)
                print(f"{kind:<18}{r['p50']:>8.2f}{r['p99']:>8.2f}{r['rps']:>8.0f}{hits:>11.1f}")
            if use_wrk:
                r = run_wrk(settings.base_url, mixed, connections=32, duration=args.duration)
                print(
                    f"\nmixed queries, wrk -t1 -c32: {r['rps']:.0f} req/s, "
                    f"p50 {r['p50']:.2f} ms, p99 {r['p99']:.2f} ms"
                )
        finally:
            stop_registry(registry)
            card_server.should_exit = True
            await card_task


if __name__ == "__main__":
    asyncio.run(main())
