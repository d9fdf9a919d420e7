"""Registry fill rate with real card fetches: ``POST /v1/agents`` and the bulk import.

Run: ``.venv/bin/python bench/registry_fill.py`` (``--agents 10000`` for a quick run).

1. Starts a card server in its own process(es): a minimal asyncio HTTP/1.1 server (keep-alive,
   pipelining: the answers to one read go out in one write, ``ETag`` / ``If-None-Match``) that
   serves ``registry_search.make_card(i)`` at ``/agents/{i}/card.json`` for any ``i``. The
   cards the run will ask for are rendered (whole 200 answers) before it listens, so before
   anything is timed; its CPU per card is printed beside the registry's. Then the registry
   (``registry_search.start_registry``) in its own process on a temporary SQLite file.
2. Normal API: ``wrk`` POSTs ``/v1/agents`` for unique card URLs (``wrk/register_cards.lua``)
   in rounds of ``--round`` seconds until ``--agents`` agents are registered; each one is
   fetched, validated and stored by the registry. Then the same URLs again for a round
   (unchanged cards: a conditional fetch answered 304, no parse).
3. Bulk: a second registry fills ``--agents`` other cards with ``a2a-node registry import FILE``
   (the CLI, as a subprocess: batches of 1,000 to ``POST /v1/agents:import``), then imports the
   same file again (all unchanged).

``--breakdown N`` instead measures, in this process, the CPU each stage of a registration costs
(``time.process_time``, all threads, so not affected by how busy the machine is): fetching N
cards through the registry's :class:`CardFetcher` (SSRF guard, slots), validating them, building
the records, and writing them with ``save_many`` in batches of ``--batch`` to a SQLite file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing import Process
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from registry_search import free_port, make_card, start_registry, wait_ready  # noqa: E402

from node.registry import RegistrySettings  # noqa: E402

LUA = ROOT / "bench" / "wrk" / "register_cards.lua"
IMPORT_FIRST, BREAKDOWN_FIRST = 10_000_000, 20_000_000  # card numbers of the import, breakdown
_PATH = re.compile(rb"^GET /agents/(\d+)/card\.json ")


class _CardProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive; GET /agents/{i}/card.json with a strong ETag; anything else 404."""

    def __init__(self, base_url: str, cache: dict[int, tuple[bytes, bytes]]) -> None:
        self.base_url, self.cache, self.buffer = base_url, cache, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        answers = []
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            answers.append(self.answer(head))
        if answers:  # pipelined requests: their answers in one write
            self.transport.write(b"".join(answers))

    def answer(self, head: bytes) -> bytes:
        match = _PATH.match(head)
        if match is None:
            return b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
        i = int(match.group(1))
        if i not in self.cache:
            self.cache[i] = _render(i, self.base_url)
        etag, body = self.cache[i]
        if b"\r\nif-none-match: " + etag in head.lower():
            return b"HTTP/1.1 304 Not Modified\r\netag: " + etag + b"\r\ncontent-length: 0\r\n\r\n"
        return body


def _render(i: int, base_url: str) -> tuple[bytes, bytes]:
    """Card ``i``'s ETag and its whole 200 answer."""
    body = json.dumps(make_card(i, base_url)).encode()
    etag = b'"c%d"' % i
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\netag: %s\r\n" % etag
    return etag, head + b"content-length: %d\r\n\r\n%s" % (len(body), body)


def _serve_cards(port: int, ranges: list[range]) -> None:
    async def main() -> None:
        base_url = f"http://127.0.0.1:{port}"
        # Rendered before it listens (so before anything is timed): an answer is then a dict
        # lookup and bytes already made; cards outside ``ranges`` are rendered on first use.
        cache = {i: _render(i, base_url) for r in ranges for i in r}
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _CardProtocol(base_url, cache), "127.0.0.1", port, reuse_port=True, backlog=1024
        )
        await server.serve_forever()

    asyncio.run(main())


def start_card_servers(port: int, processes: int, ranges: list[range]) -> list[Process]:
    servers = [
        Process(target=_serve_cards, args=(port, ranges), daemon=True) for _ in range(processes)
    ]
    for server in servers:
        server.start()
    return servers


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


CARD_PIDS: list[int] = []


def cards_cpu() -> float:
    """CPU seconds the card server processes have used so far."""
    return sum(cpu_seconds(pid) for pid in CARD_PIDS)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


async def agents_of(registry_url: str) -> int:
    async with httpx.AsyncClient() as http:
        return int((await http.get(registry_url + "/healthz")).json()["agents"])


def wrk_round(
    registry_url: str, cards_url: str, offset: int, seconds: float, args: argparse.Namespace
) -> tuple[int, int, float]:
    """One wrk run; returns (requests, next offset, requests/s)."""
    threads = args.wrk_threads
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{args.connections}", f"-d{seconds}s", "-s", str(LUA),
         registry_url, "--", cards_url, str(offset), str(threads)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    if (refused := int(re.search(r"REFUSED (\d+)", out.stdout).group(1))) > 0:  # type: ignore[union-attr]
        raise RuntimeError(f"{refused} registrations refused:\n{out.stdout}\n{out.stderr}")
    requests = int(re.search(r"(\d+) requests in", out.stdout).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out.stdout).group(1))  # type: ignore[union-attr]
    following = int(re.search(r"NEXT (\d+)", out.stdout).group(1)) + 1  # type: ignore[union-attr]
    return requests, following, rps


async def fill_api(registry_url: str, pid: int, cards_url: str, args: argparse.Namespace) -> None:
    offset, done, elapsed, cpu, served = 0, 0, 0.0, cpu_seconds(pid), cards_cpu()
    while done < args.agents:
        start = time.perf_counter()
        requests, offset, rps = wrk_round(registry_url, cards_url, offset, args.round, args)
        elapsed += time.perf_counter() - start
        done = await agents_of(registry_url)
        print(f"  round: {requests} registrations in {args.round} s ({rps:.0f}/s), {done} agents")
    cpu, served = cpu_seconds(pid) - cpu, cards_cpu() - served
    print(
        f"POST /v1/agents: {done} agents in {elapsed:.1f} s = {done / elapsed:.0f} registrations/s "
        f"(wrk -t{args.wrk_threads} -c{args.connections}); registry CPU {cpu:.1f} s = "
        f"{done / cpu:.0f} registrations per CPU second ({cpu * 1e6 / done:.0f} us each); "
        f"card server {served * 1e6 / done:.0f} us CPU per card; {uptime()}"
    )
    # The same cards again: every fetch is conditional and answered 304 (no parse).
    cpu = cpu_seconds(pid)
    requests, _, rps = wrk_round(registry_url, cards_url, 0, args.round, args)
    cpu = cpu_seconds(pid) - cpu
    print(
        f"POST /v1/agents again, unchanged: {rps:.0f}/s ({requests} in {args.round} s), "
        f"{requests / cpu:.0f} per registry CPU second"
    )


def run_import(registry_url: str, pid: int, path: Path, args: argparse.Namespace) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start, cpu, served = time.perf_counter(), cpu_seconds(pid), cards_cpu()
    out = subprocess.run(
        [sys.executable, "-m", "node.cli", "registry", "import", str(path), "--registry",
         registry_url, "--batch", str(args.batch), "--concurrency", str(args.import_concurrency)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"import failed ({out.returncode}):\n{out.stdout}\n{out.stderr[-2000:]}")
    cpu, served = cpu_seconds(pid) - cpu, cards_cpu() - served
    lines = sum(1 for _ in path.open())
    return (
        f"{out.stdout.strip()} [wall {time.perf_counter() - start:.1f} s with CLI start-up; "
        f"registry CPU {cpu:.1f} s = {lines / cpu:.0f} per CPU second ({cpu * 1e6 / lines:.0f} "
        f"us each); card server {served * 1e6 / lines:.0f} us CPU per card]"
    )


async def breakdown(cards_url: str, tmp: str, args: argparse.Namespace) -> None:
    """CPU per card of each stage of the import path, measured in this process."""
    from node.registry.bulk import Prepared, prepare_all
    from node.registry.cards import card_from_body
    from node.registry.fetcher import CardFetcher
    from node.registry.service import Registry
    from node.registry.store import AgentStore, rows_of
    from node.tooling.guards.urls import UrlGuard

    n, first = args.breakdown, BREAKDOWN_FIRST
    settings = settings_for(tmp, "breakdown")
    urls = [f"{cards_url}/agents/{first + i}/card.json" for i in range(n)]
    fetcher = CardFetcher(UrlGuard(allow_cidrs=list(settings.allow_cidrs)), settings)
    await fetcher.fetch(urls[0], wait_s=None)  # connections and DNS out of the figures
    costs: dict[str, float] = {}

    async def fetch_all() -> list[bytes]:
        sem = asyncio.Semaphore(settings.fetch_concurrency)

        async def one(url: str) -> bytes:
            async with sem:
                body = (await fetcher.fetch(url, wait_s=None)).body
                assert body is not None
                return body

        return list(await asyncio.gather(*(one(u) for u in urls)))

    for _ in range(2):  # the lower of two runs
        start = time.process_time()
        bodies = await fetch_all()
        cpu = time.process_time() - start
        costs["fetch (CardFetcher.fetch)"] = min(cpu, costs.get("fetch (CardFetcher.fetch)", cpu))
    from node.registry.pipelined import fetch_pipelined

    for _ in range(2):
        start = time.process_time()
        piped: list[object] = [None] * n
        left = await fetch_pipelined(fetcher, urls, {}, piped.__setitem__)
        cpu = time.process_time() - start
        assert not left and all(p is not None for p in piped), left[:5]
        key = "fetch pipelined (fetch_pipelined)"
        costs[key] = min(cpu, costs.get(key, cpu))
    for _ in range(2):
        start = time.process_time()
        for body in bodies:
            card_from_body(body)
        cpu = time.process_time() - start
        costs["validate (card_from_body)"] = min(cpu, costs.get("validate (card_from_body)", cpu))
    for _ in range(2):
        start = time.process_time()
        got = await prepare_all(fetcher, urls, {}, wait_s=None)
        cpu = time.process_time() - start
        key = "fetch + validate (prepare_all, as imports)"
        costs[key] = min(cpu, costs.get(key, cpu))
    await fetcher.aclose()
    store = AgentStore(settings.db_url)
    await store.open()
    registry = Registry(settings, store, lambda: None)  # type: ignore[arg-type,return-value]
    now = time.time()
    start = time.process_time()
    records, texts = [], {}
    for g in got:
        assert isinstance(g, Prepared)
        record = registry._record(g, now, now)
        assert registry.unservable(record, render=False) is None  # as registrations check
        records.append(record)
        texts[record.id] = g.info.text
    costs["record + unservable check"] = time.process_time() - start
    start = time.process_time()
    for i in range(0, n, args.batch):
        await store.save_many(rows_of(records[i : i + args.batch], texts))  # as the service
    costs[f"store.save_many (batches of {args.batch})"] = time.process_time() - start
    await store.close()
    for stage, cpu in costs.items():
        print(f"  {stage:42s} {cpu * 1e6 / n:7.0f} us per card")
    print(f"breakdown of {n} cards; {uptime()}")


def settings_for(tmp: str, name: str) -> RegistrySettings:
    return RegistrySettings(
        port=free_port(),
        db=str(Path(tmp) / f"{name}.db"),
        allow_cidrs=("127.0.0.0/8",),
        ttl_s=3600,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--round", type=int, default=10, help="seconds per wrk round")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--wrk-threads", type=int, default=1)
    parser.add_argument("--card-processes", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--import-concurrency", type=int, default=4)
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument("--breakdown", type=int, default=0, metavar="N")
    args = parser.parse_args()

    cards_port = free_port()
    cards_url = f"http://127.0.0.1:{cards_port}"
    ranges = [range(1)]  # what the runs below ask for, rendered up front (wrk may go past)
    if args.breakdown:
        ranges.append(range(BREAKDOWN_FIRST, BREAKDOWN_FIRST + args.breakdown))
    else:
        ranges.append(range(0 if args.skip_api else args.agents * 11 // 10))
        ranges.append(range(IMPORT_FIRST, IMPORT_FIRST + args.agents * (not args.skip_import)))
    card_servers = start_card_servers(cards_port, args.card_processes, ranges)
    CARD_PIDS.extend(s.pid for s in card_servers if s.pid is not None)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            await wait_ready(cards_url + "/agents/0/card.json")
            print(
                f"card server: {args.card_processes} asyncio process(es), "
                f"{sum(map(len, ranges))} cards rendered before any timing; {uptime()}"
            )
            if args.breakdown:
                await breakdown(cards_url, tmp, args)
                return
            if not args.skip_api:
                settings = settings_for(tmp, "api")
                registry = start_registry(settings)
                try:
                    await wait_ready(settings.base_url + "/healthz")
                    await fill_api(settings.base_url, registry.pid, cards_url, args)
                finally:
                    registry.send_signal(signal.SIGTERM)
                    registry.wait(timeout=30)
            if not args.skip_import:
                settings = settings_for(tmp, "import")
                path = Path(tmp) / "cards.txt"
                first = IMPORT_FIRST  # other cards than the API fill's
                path.write_text(
                    "".join(
                        f"{cards_url}/agents/{first + i}/card.json\n" for i in range(args.agents)
                    )
                )
                registry = start_registry(settings)
                try:
                    await wait_ready(settings.base_url + "/healthz")
                    result = run_import(settings.base_url, registry.pid, path, args)
                    print(f"import: {result}; {uptime()}")
                    result = run_import(settings.base_url, registry.pid, path, args)
                    print(f"import again (unchanged): {result}")
                    print(f"registry holds {await agents_of(settings.base_url)} agents")
                finally:
                    registry.send_signal(signal.SIGTERM)
                    registry.wait(timeout=30)
        finally:
            for server in card_servers:
                server.terminate()


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    asyncio.run(main())
