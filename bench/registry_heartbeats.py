"""Registry heartbeats at scale: write transactions/s and heartbeat latency, over real HTTP.

Run: ``source /tmp/pgenv; .venv/bin/python bench/registry_heartbeats.py``
(``--agents 2000 --period 10 --duration 30`` are the defaults: 2,000 agents at the node's default
heartbeat period, 200 heartbeats/s; ``--replicas 2`` spreads them over two registry processes).

1. Creates a fresh PostgreSQL database from ``A2A_NODE_TEST_PG_URL`` (dropped afterwards), starts
   a card server in this process and ``serve_registry`` in its own process(es) on that database.
2. Fills the agents: ``--fill direct`` (default) writes generated agents straight into the store
   before the registry starts (``registry_scale.fill_store``: fast, the heartbeat phase is what
   is measured), ``--fill http`` registers each through ``POST /v1/agents`` (the registry
   fetches each card).
3. Sends each agent's ``PUT /v1/agents/{id}/heartbeat`` once per period, spread evenly (an open
   loop: a slow answer does not delay the next heartbeat; at most ``--connections`` open per
   replica, and a heartbeat's latency counts from its due time, so waiting for a connection
   counts), and reports heartbeat p50/p99/max and
   the database's committed transactions/s (``pg_stat_database.xact_commit`` delta over the
   phase for the bench's own database: writes and reads alike, so an upper bound on writes).
   ``--sender wrk`` instead runs one ``wrk`` per replica (``bench/wrk/heartbeats.lua``; replica
   ``r`` of ``R`` beats agents ``r, r+R, ...`` and its ``--wrk-threads`` take them in turn, so
   each agent beats once per pass over the fleet, as behind a load balancer) as fast as the
   registries answer, a closed loop: the capacity, after a warm-up that beats every agent once
   on every replica (so each replica's cache of known agents holds the fleet, as in steady
   state; ``--warmup 0`` measures the cold misses instead).
4. Reports CPU per heartbeat, which a busy machine changes least: the registry processes'
   (user + system, ``/proc``), PostgreSQL's (the backends serving the bench's database) and,
   with ``--sender wrk``, wrk's (``--wrk-threads`` per replica); on a 2-core machine their sum
   decides the rate. And each registry's resident memory at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from registry_scale import Population, cpu_s, fill_store, fresh_database, rss_mb  # noqa: E402
from registry_search import card_app, free_port, stop_registry, wait_ready  # noqa: E402

from node.registry import RegistrySettings  # noqa: E402

WRK_SCRIPT = ROOT / "bench" / "wrk" / "heartbeats.lua"


async def fill(registry_url: str, cards_url: str, agents: int) -> list[str]:
    """Register every agent (16 at a time); return the ids the registry gave them."""
    ids: list[str] = [""] * agents
    todo = iter(range(agents))
    async with httpx.AsyncClient(base_url=registry_url, timeout=30) as http:

        async def worker() -> None:
            for i in todo:
                url = f"{cards_url}/agents/{i}/card.json"
                response = await http.post("/v1/agents", json={"card_url": url})
                if response.status_code not in (200, 201):
                    raise RuntimeError(f"registering {url}: {response.status_code} {response.text}")
                ids[i] = response.json()["id"]

        await asyncio.gather(*(worker() for _ in range(16)))
    return ids


async def commits(url: str) -> tuple[int, int, int]:
    """Committed transactions of the bench's database, and the updates and HOT updates (no
    index entry written) of its agent rows, so far."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        value = await conn.fetchval(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        upd, hot = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
            "WHERE relname = 'registry_agents'"
        )
        return int(value), int(upd), int(hot)
    finally:
        await conn.close()


async def sweep_cost(url: str) -> str:
    """The sweep's statement (as :meth:`AgentStore.sweep` runs it) over every row, deleting
    none (a cutoff before every heartbeat: the steady state), in a rolled-back transaction:
    its time and the backend's CPU."""
    conn = await asyncpg.connect(url)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        rows = await conn.fetchval("SELECT count(*) FROM registry_agents")
        size = await conn.fetchval("SELECT pg_relation_size('registry_agents')")
        times = []
        for _ in range(3):
            cpu0, t0 = cpu_s(pid), time.perf_counter()
            async with conn.transaction():
                await conn.execute("DELETE FROM registry_agents WHERE last_seen < 0")
            times.append((time.perf_counter() - t0, cpu_s(pid) - cpu0))
        plan = await conn.fetchval(
            "EXPLAIN (FORMAT TEXT) DELETE FROM registry_agents WHERE last_seen < 0"
        )
        wall, cpu = min(times)
        return (
            f"sweep over {rows} rows ({size / 2**20:.0f} MB heap): {wall * 1000:.0f} ms, "
            f"backend CPU {cpu * 1000:.0f} ms (best of 3); plan: {plan.splitlines()[-1].strip()}"
        )
    finally:
        await conn.close()


def start_registry(settings: RegistrySettings, loop: str) -> subprocess.Popen[bytes]:
    """``serve_registry`` in its own process, as ``a2a-node registry`` runs it
    (``run_registry``: uvloop when installed) or on asyncio's loop (``loop="asyncio"``)."""
    run = "run_registry(s)" if loop == "uvloop" else "asyncio.run(serve_registry(s))"
    script = (
        "import asyncio, sys\n"
        "from node.registry import RegistrySettings, serve_registry\n"
        "from node.registry.app import run_registry\n"
        f"s = RegistrySettings.model_validate_json(sys.argv[1])\n{run}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    return subprocess.Popen(
        [sys.executable, "-c", script, settings.model_dump_json()],
        env=env,
        stderr=subprocess.DEVNULL,
    )


async def backend_pids(url: str) -> list[int]:
    """The PostgreSQL backends connected to the bench's database (the registries' pools)."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return [int(r["pid"]) for r in rows]
    finally:
        await conn.close()


def cpu_of(pids: list[int]) -> float:
    """CPU seconds used so far by ``pids`` (a process gone or not readable counts 0)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_s(pid)
    return total


def run_wrk(
    urls: list[str],
    ids: list[str],
    seconds: float,
    connections: int,
    start: int = 0,
    threads: int = 1,
    split: bool = True,
) -> tuple[int, float, float, Counter[str]]:
    """One ``wrk`` per replica for ``seconds``, together, each from agent ``start`` on, with
    ``threads`` threads sharing ``connections`` and taking the ids in turn: heartbeats answered
    200 with an entry, the worst replica's p50 and p99 (ms), and failures by kind. ``split``:
    replica ``r`` of ``R`` beats the agents ``r, r+R, ...`` (each agent once per pass over the
    fleet, as behind a load balancer); otherwise every replica beats every agent (warm-up)."""
    listings = []
    for r in range(len(urls)):
        with tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False) as listing:
            part = ids[r :: len(urls)] if split else ids
            listing.write("\n".join(part) + "\n")
        listings.append(listing.name)
    try:
        command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:.0f}s"]
        command += ["--timeout", "30s", "--latency", "-s", str(WRK_SCRIPT)]
        procs = [
            subprocess.Popen(
                [*command, url, "--", name, str(start), str(threads)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for url, name in zip(urls, listings, strict=True)
        ]
        outs = [p.communicate()[0] for p in procs]
    finally:
        for name in listings:
            os.unlink(name)
    ok, p50, p99, failures = 0, 0.0, 0.0, Counter[str]()
    units = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    for out in outs:
        check = re.search(r"HEARTBEAT-CHECK ok=(\d+) bad_status=(\d+) bad_body=(\d+)", out)
        if check is None:
            raise RuntimeError(f"wrk failed:\n{out}")
        ok += int(check[1])
        failures["bad status"] += int(check[2])
        failures["bad body"] += int(check[3])
        errors = re.search(r"connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
        if errors is not None:
            for kind, n in zip(
                ("connect", "read", "write", "timeout"), errors.groups(), strict=True
            ):
                failures[kind] += int(n)
        for pct in ("50", "99"):
            found = re.search(rf"\s{pct}%\s+([\d.]+)(us|ms|s)\b", out)
            if found is not None:
                value = float(found[1]) * units[found[2]]
                p50, p99 = (max(p50, value), p99) if pct == "50" else (p50, max(p99, value))
    return ok, p50, p99, +failures


class Connections:
    """Keep-alive HTTP/1.1 connections to one server, for minimal PUT requests (a raw client:
    httpx costs ~1 ms of CPU per request, which on a busy 2-core machine slows the sender more
    than the registry)."""

    def __init__(self, url: str, limit: int) -> None:
        u = httpx.URL(url)
        self.host, self.port = u.host, u.port or 80
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.slots = asyncio.Semaphore(limit)  # open connections at most (a request waits)

    async def put(self, path: str) -> int:
        """PUT ``path``; a kept-alive connection the server closed meanwhile is replaced once."""
        async with self.slots:
            return await self._send(path)

    async def _send(self, path: str) -> int:
        while self.idle:
            reader, writer = self.idle.pop()
            try:
                return await self._put(reader, writer, path)
            except (OSError, asyncio.IncompleteReadError):
                writer.close()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        return await self._put(reader, writer, path)

    async def _put(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str
    ) -> int:
        request = f"PUT {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: 0\r\n\r\n"
        writer.write(request.encode())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        self.idle.append((reader, writer))
        return status

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def heartbeats(
    urls: list[str], ids: list[str], period: float, duration: float, connections: int
) -> tuple[list[float], Counter[str]]:
    """Latencies (ms, from each heartbeat's due time, so waiting for a connection counts) of
    every heartbeat sent during ``duration``, and the failures by kind."""
    times: list[float] = []
    failures: Counter[str] = Counter()
    pools = [Connections(u, connections) for u in urls]
    pending: set[asyncio.Task[None]] = set()

    async def beat(i: int) -> None:
        start = time.perf_counter()
        try:
            status = await asyncio.wait_for(
                pools[i % len(pools)].put(f"/v1/agents/{ids[i]}/heartbeat"), 30
            )
            if status != 200:
                failures[f"HTTP {status}"] += 1
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            failures[type(exc).__name__] += 1
        times.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    n = 0
    while (due := n * period / len(ids)) < duration:
        delay = start + due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(beat(n % len(ids)))
        pending.add(task)
        task.add_done_callback(pending.discard)
        n += 1
    lag = time.perf_counter() - start - duration
    await asyncio.gather(*pending)
    for pool in pools:
        pool.close()
    if lag > 1:
        print(f"warning: the sender fell {lag:.1f} s behind its schedule (a busy machine)")
    return times, failures


def children_cpu() -> float:
    """User + system CPU seconds of this process's reaped children (the finished wrk runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(len(values) * p))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--period", type=float, default=10.0, help="heartbeat period, seconds")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of heartbeats")
    parser.add_argument("--replicas", type=int, default=1, help="registry processes")
    parser.add_argument("--fill", choices=("direct", "http"), default="direct")
    parser.add_argument("--connections", type=int, default=256, help="per replica, at most")
    parser.add_argument(
        "--sender",
        choices=("python", "wrk"),
        default="python",
        help="python: open loop at the period's rate; wrk: as fast as answered (capacity)",
    )
    parser.add_argument(
        "--wrk-threads", type=int, default=1, help="wrk: threads per replica's wrk (default 1)"
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="wrk: passes over every agent first (0: none)"
    )
    parser.add_argument("--known", type=int, default=None, help="registry known_agents setting")
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="the registries' event loop (uvloop: as a2a-node registry runs, when installed)",
    )
    parser.add_argument(
        "--sweep", action="store_true", help="then time the sweep's statement over every row"
    )
    parser.add_argument(
        "--ttl",
        type=float,
        default=30.0,
        help="registry ttl_s (evicted after 3x; wrk at 100k agents: longer than a pass over "
        "them, else the next pass finds each agent silent for evict_after and reads its row)",
    )
    parser.add_argument(
        "--keep-db",
        metavar="NAME",
        help="fill PostgreSQL database NAME once and keep it (a later run with as many agents "
        "reuses it; drop it by hand)",
    )
    parser.add_argument(
        "--entry-bytes", action="store_true", help="only print the memory of a cache entry"
    )
    args = parser.parse_args()
    if args.entry_bytes:
        entry_bytes()
        return
    base = os.environ.get("A2A_NODE_TEST_PG_URL")
    if not base:
        sys.exit("set A2A_NODE_TEST_PG_URL (source /tmp/pgenv)")
    if args.sender == "wrk" and shutil.which("wrk") is None:
        sys.exit("--sender wrk needs wrk on PATH")

    cards_port = free_port()
    cards_url = f"http://127.0.0.1:{cards_port}"
    config = uvicorn.Config(
        card_app(cards_url), port=cards_port, log_level="warning", lifespan="off", ws="none"
    )
    card_server = uvicorn.Server(config)
    card_task = asyncio.create_task(card_server.serve())
    extra = {"known_agents": args.known} if args.known is not None else {}
    database = kept_database(base, args.keep_db) if args.keep_db else None
    async with database or fresh_database(base, "a2a_bench_heartbeats") as db:
        registries: list[subprocess.Popen[bytes]] = []
        urls: list[str] = []
        try:
            # stamped an hour ahead: a long fill and start-up must not evict them first
            ahead = time.time() + 3600
            ids = await kept_ids(db, args.agents, ahead) if args.keep_db else []
            if ids:
                print(f"reusing the {len(ids)} agents of database {args.keep_db}")
            elif args.fill == "direct":
                seconds, ids = await fill_store(db, Population(), args.agents, last_seen=ahead)
                print(f"filled {args.agents} generated agents into the store in {seconds:.1f} s")
            for _ in range(args.replicas):
                settings = RegistrySettings(
                    port=free_port(), db=db, allow_cidrs=("127.0.0.0/8",), ttl_s=args.ttl, **extra
                )  # default heartbeat settings (one flush per second)
                registries.append(start_registry(settings, args.loop))
                urls.append(settings.base_url)
                await wait_ready(settings.base_url + "/healthz")
            await wait_ready(cards_url + "/agents/0/card.json")
            if args.fill == "http":
                t0 = time.perf_counter()
                ids = await fill(urls[0], cards_url, args.agents)
                print(f"registered {args.agents} agents in {time.perf_counter() - t0:.1f} s")
            async with httpx.AsyncClient(base_url=urls[-1]) as http:
                listed = (await http.get("/healthz")).json()["agents"]
            print(f"the registry holds {listed} agents")
            pids = [r.pid for r in registries]
            if args.sender == "wrk" and args.warmup:
                t0 = time.perf_counter()
                for _ in range(args.warmup):  # each replica sees every agent once
                    await asyncio.to_thread(warm, urls, ids, args.connections)
                warmed = time.perf_counter() - t0
                print(f"warm-up: every agent beaten once on every replica in {warmed:.1f} s")
            backends = await backend_pids(db)
            cpu0, pg0 = cpu_of(pids), cpu_of(backends)
            before, upd0, hot0 = await commits(db)
            load = os.getloadavg()
            wrk0 = children_cpu()
            t0 = time.perf_counter()
            if args.sender == "wrk":
                served, p50, p99, failures = await asyncio.to_thread(
                    run_wrk, urls, ids, args.duration, args.connections, 0, args.wrk_threads
                )
                maximum = float("nan")
            else:
                times, failures = await heartbeats(
                    urls, ids, args.period, args.duration, args.connections
                )
                times.sort()
                served = len(times) - sum(failures.values())
                p50, p99, maximum = statistics.median(times), pct(times, 0.99), times[-1]
            elapsed = time.perf_counter() - t0
            cpu1, pg1 = cpu_of(pids), cpu_of(backends)
            wrk_cpu = children_cpu() - wrk0  # the wrk processes of the phase (reaped)
            await asyncio.sleep(1.5)  # let the last batch and the statistics land
            after, upd1, hot1 = await commits(db)
            rss = [rss_mb(pid)[0] for pid in pids]
            sweep = await sweep_cost(db) if args.sweep else ""
        finally:
            for registry in registries:
                stop_registry(registry)
            card_server.should_exit = True
            await card_task
    rate = (after - before) / (elapsed + 1.5)
    sent = served + sum(failures.values())
    offered = "" if args.sender == "wrk" else f" of {args.agents / args.period:.0f}/s offered"
    print(
        f"{args.sender}: {served} heartbeats served in {elapsed:.1f} s ({served / elapsed:.0f}/s"
        f"{offered}) by {args.replicas} replica(s), failed: {dict(failures) or 0}; latency p50"
        f" {p50:.1f} ms, p99 {p99:.1f} ms, max {maximum:.1f} ms; database: {rate:.1f}"
        " committed transactions/s"
    )
    print(
        f"CPU per heartbeat: registries {(cpu1 - cpu0) / max(sent, 1) * 1e6:.0f} us, "
        f"PostgreSQL backends {(pg1 - pg0) / max(sent, 1) * 1e6:.0f} us; registry CPU "
        f"{(cpu1 - cpu0) / elapsed:.2f} cores, PostgreSQL {(pg1 - pg0) / elapsed:.2f} cores; "
        f"registry RSS {', '.join(f'{r:.0f}' for r in rss)} MB; load before "
        f"{load[0]:.1f} {load[1]:.1f}, after {' '.join(f'{x:.1f}' for x in os.getloadavg()[:2])}"
    )
    if args.sender == "wrk":
        total = (cpu1 - cpu0) + (pg1 - pg0) + wrk_cpu
        print(
            f"CPU per heartbeat, wrk: {wrk_cpu / max(sent, 1) * 1e6:.0f} us; registries + "
            f"PostgreSQL + wrk: {total / max(sent, 1) * 1e6:.0f} us ({total / elapsed:.2f} cores)"
        )
    print(f"agent rows updated: {upd1 - upd0}, of which HOT (no index written): {hot1 - hot0}")
    if sweep:
        print(sweep)


def entry_bytes(agents: int = 20_000) -> None:
    """Print the bytes one :class:`KnownAgents` entry holds (tracemalloc), for generated agents
    read as from the store (fresh strings), with and without its kept heartbeat answer."""
    import gc
    import pickle
    import tracemalloc
    from dataclasses import replace

    from node.registry.heartbeat_route import _head
    from node.registry.known import KnownAgents

    population, now = Population(), time.time()
    blob = pickle.dumps([replace(population.agent(i, now)[0], card={}) for i in range(agents)])
    for with_head in (False, True):
        gc.collect()
        tracemalloc.start()
        records = pickle.loads(blob)
        known = KnownAgents(agents)
        for record in records:
            known.put(record.id, "0123456789abcdef0123456789abcdef", record)
            if with_head:
                known.keep_head(record.id, _head(record))
        del records
        gc.collect()
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        what = "with its kept answer" if with_head else "entry only"
        print(f"KnownAgents, {what}: {used / agents:.0f} bytes per agent ({agents} agents)")


def warm(urls: list[str], ids: list[str], connections: int) -> None:
    """Beat every agent at least once on every replica (wrk in 5 s runs, each going on from
    where the slowest replica's last one stopped)."""
    done = 0
    while done < len(ids):
        ok, _, _, failures = run_wrk(urls, ids, 5, connections, start=done, split=False)
        if failures:
            raise RuntimeError(f"warm-up heartbeats failed: {dict(failures)}")
        done += ok // len(urls)


@contextlib.asynccontextmanager
async def kept_database(base: str, name: str) -> AsyncIterator[str]:
    """Database ``name`` (created when missing), kept after the run so the next reuses it."""
    admin = await asyncpg.connect(base)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield base.rsplit("/", 1)[0] + "/" + name


async def kept_ids(db: str, agents: int, last_seen: float) -> list[str]:
    """The ids already in ``db`` (stamped ``last_seen`` again, so none is evicted during the
    run); none when it is new. A database holding another number of agents is refused."""
    conn = await asyncpg.connect(db)
    try:
        if not await conn.fetchval("SELECT to_regclass('registry_agents') IS NOT NULL"):
            return []
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM registry_agents ORDER BY id")]
        if len(ids) != agents:
            sys.exit(f"the kept database holds {len(ids)} agents, not {agents}: drop it first")
        await conn.execute("UPDATE registry_agents SET last_seen = $1", last_seen)
        await conn.execute("VACUUM ANALYZE registry_agents")
        return ids
    finally:
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
