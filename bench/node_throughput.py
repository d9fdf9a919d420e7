"""Node throughput: blocking SendMessage through our node vs a bare a2a-sdk server, with wrk.

Run (one command, all four servers, one after another):

    .venv/bin/python bench/node_throughput.py [--duration 10] [--connections 32] [--only a,b]
        [--rounds N] [--nice -10] [--profile DIR] [--experiment NAME[,NAME]]

Servers (each its own process, ``python bench/node_throughput.py --serve KIND --port P``):

- ``a`` bare SDK echo server (notes §2 executor: Task, start_work, add_artifact, complete;
  InMemoryTaskStore; JSON-RPC at ``/``, card route, REST under ``/rest``; no push store);
- ``b`` our node (``build_node_app``), card with the built-in ``calculate``, store ``memory``;
- ``c`` our node with its default durable store (``store="sqlite"``, data dir in a temp folder);
- ``d`` bare SDK echo server on ``DatabaseTaskStore`` (``sqlite+aiosqlite`` file, ``initialize()``).
- ``h`` as ``b`` with ``server.metrics: false`` (issue 12: what metrics cost, (b)/(h) >= 0.97).

Method: uvicorn 1 worker (uvicorn's "auto": uvloop and httptools when installed, else asyncio
and h11; ``--loop``/``--http`` force one for every server alike), access log off, log level
warning, ``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false`` for every server; server pinned to CPU0
and wrk to CPU1 (``taskset``). Readiness is polled, one request is checked by hand, a 2 s wrk
warm-up is discarded, then ``wrk -t1 -cC -dDs --latency --timeout 10s`` runs
``bench/wrk/send_message.lua``: every server gets the same body (a data part
``{"skill":"calculate","arguments":{"expression":"1+1"}}``; the echo executor echoes its empty
text) with a unique messageId per request. The Lua script checks every response (2xx, no JSON-RPC
error, TASK_STATE_COMPLETED); a run with any error is marked INVALID. The idle RSS of a b-style
node is read from /proc/PID/status right after startup.

Besides req/s and p50/p99 the table shows the server's CPU use over the run, CPU0 time used by
anything else ("other": on a shared machine req/s then drops), and server CPU ms per request,
which stays meaningful when the machine is busy. ``--nice -10`` (root) shields the run somewhat.

Profiling: ``--profile DIR`` runs every server under cProfile (env ``BENCH_PROFILE``) and prints
the top functions per server; the figures of a profiled run are not benchmark results.
Experiments: ``--experiment NAME`` monkeypatches the node *inside the bench server process only*
(env ``BENCH_EXPERIMENT``, see ``EXPERIMENTS``); such runs are labelled and are not results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LUA = ROOT / "bench" / "wrk" / "send_message.lua"
SERVER_CPU, WRK_CPU = "0", "1"
KINDS = {
    "a": "bare SDK echo, InMemoryTaskStore",
    "b": "node, calculate, store=memory (lean path)",
    "c": "node, calculate, store=sqlite (default, lean path)",
    "d": "bare SDK echo, DatabaseTaskStore sqlite+aiosqlite",
    "e": "node, calculate, store=sqlite, lean path off",
    "f": "node, calculate, store=memory, lean path off",
    "g": "bare SDK echo, InMemoryTaskStore, node's SDK tuning",
    "h": "node, calculate, store=memory, metrics off",
}
#: (top, bottom, target ratio of req/s) — issue 13: lean durable ≥ 2.5× the bare SDK in memory,
#: the SDK path (lean off, durable) ≥ 0.95×; the durable node ≥ 5× the SDK's own SQLite store.
#: Issue 12: metrics on (b, the default) cost at most 3 % against metrics off (h).
TARGETS = (("c", "a", 2.5), ("e", "a", 0.95), ("c", "d", 5.0), ("b", "h", 0.97))
#: p99 ≤ this × p50 for these servers (issue 13: the durable lean path).
TAIL_TARGETS = {"c": 2.0}
RSS_TARGET_MB = 120.0
CALC_PART = {"data": {"skill": "calculate", "arguments": {"expression": "1+1"}}}


# -- servers (run inside the child process) ----------------------------------------------------


def sdk_app(store_kind: str, data_dir: Path, port: int, tuned: bool = False) -> Any:
    """The minimal SDK server of the notes (§2), on the in-memory or the SQLAlchemy store.

    ``tuned`` applies the node's SDK fixes (``node.server.sdk_tuning``) first.
    """
    if tuned:
        from node.server import sdk_tuning

        print("sdk tuning:", sdk_tuning.apply(), flush=True)
    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import (
        create_agent_card_routes,
        create_jsonrpc_routes,
        create_rest_routes,
    )
    from a2a.server.tasks import DatabaseTaskStore, InMemoryTaskStore, TaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
    from starlette.applications import Starlette
    from starlette.routing import Mount

    class EchoExecutor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                assert context.message is not None
                task = new_task_from_user_message(context.message)
                await event_queue.enqueue_event(task)
            up = TaskUpdater(event_queue, task.id, task.context_id)
            await up.start_work()
            text = f"echo: {context.get_user_input()}"
            await up.add_artifact([Part(text=text)], name="echo")
            await up.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            assert context.task_id and context.context_id
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="Echo Agent",
        description="Echoes text back",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", url=f"{url}/", protocol_version="1.0"),
            AgentInterface(protocol_binding="HTTP+JSON", url=f"{url}/rest", protocol_version="1.0"),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="echo text", tags=["echo"])],
    )
    task_store: TaskStore
    if store_kind == "sqlite":
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(f"sqlite+aiosqlite:///{data_dir / 'sdk-tasks.db'}")
        task_store = DatabaseTaskStore(engine)
    else:
        task_store = InMemoryTaskStore()
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=task_store, agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if isinstance(task_store, DatabaseTaskStore):
            await task_store.initialize()
        yield
        await handler.aclose()
        if isinstance(task_store, DatabaseTaskStore):
            await task_store.engine.dispose()

    return Starlette(
        lifespan=lifespan,
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/"),
            Mount("/rest", routes=create_rest_routes(handler)),
        ],
    )


def node_app(
    store_kind: str, data_dir: Path, port: int, lean: bool = True, metrics: bool = True
) -> Any:
    """Our node with only the built-in ``calculate`` tool; ``lean`` is ``server.lean_path``,
    ``metrics`` is ``server.metrics``."""
    from node.card import parse_card
    from node.server.app import build_node_app

    card = parse_card(
        {
            "id": "bench",
            "name": "Bench Node",
            "description": "Throughput benchmark node with one trivial tool.",
            "tools": ["calculate"],
            "server": {"lean_path": lean, "metrics": metrics},
        }
    )
    return build_node_app(
        card, public_url=f"http://127.0.0.1:{port}", data_dir=data_dir, store=store_kind
    )


SERVERS: dict[str, Callable[[Path, int], Any]] = {
    "a": lambda d, p: sdk_app("memory", d, p),
    "b": lambda d, p: node_app("memory", d, p),
    "c": lambda d, p: node_app("sqlite", d, p),
    "d": lambda d, p: sdk_app("sqlite", d, p),
    "e": lambda d, p: node_app("sqlite", d, p, lean=False),
    "f": lambda d, p: node_app("memory", d, p, lean=False),
    "g": lambda d, p: sdk_app("memory", d, p, tuned=True),
    "h": lambda d, p: node_app("memory", d, p, metrics=False),
}
READY_PATH = {k: "/.well-known/agent-card.json" for k in ("a", "d", "g")}


# -- experiments: monkeypatches applied in the bench server process only ------------------------


def _experiments() -> list[str]:
    return [name for name in os.environ.get("BENCH_EXPERIMENT", "").split(",") if name]


def _exp_no_guards(app: Any) -> None:
    """Node: remove the edge middleware (body limit, JSON-RPC content type)."""
    app.user_middleware = []
    app.middleware_stack = None


def _exp_no_autocheckpoint(app: Any) -> None:
    """Node: SQLite never checkpoints its WAL (the file grows; to see what checkpoints cost)."""
    from node.store.sqlite import SqliteTaskStore

    opened = SqliteTaskStore._open

    def _open(self: SqliteTaskStore) -> Any:
        first = self._writer is None
        reader, writer = opened(self)
        if first:
            writer._conn.execute("PRAGMA wal_autocheckpoint=0")
        return reader, writer

    SqliteTaskStore._open = _open  # type: ignore[method-assign]


def _exp_gc_log(app: Any) -> None:
    """Print every collection of generation 2 (and any over 2 ms) with its pause, to stderr."""
    import gc

    started = [0.0]

    def timing(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - started[0]) * 1000
        if info["generation"] == 2 or ms > 2:
            print(f"gc gen{info['generation']}: {ms:.1f} ms at {time.perf_counter():.3f}",
                  file=sys.stderr, flush=True)  # fmt: skip

    gc.callbacks.append(timing)


def _exp_loop_lag(app: Any) -> None:
    """Record the event loop's stalls: a thread asks the loop to run a probe every 2 ms and
    prints, every ~2 s to stderr, how late the probes ran (p50/p99/max, how many over 10 and
    20 ms, when the worst was), to set beside ``gc_log``'s pauses and the latency tail. (The
    server dies by uvicorn's re-raised SIGTERM: no summary at exit.)"""
    import asyncio
    import threading

    import node.server.app

    freeze = node.server.app.freeze_startup_heap

    def probe_thread(loop: asyncio.AbstractEventLoop) -> None:
        lags: list[tuple[float, float]] = []

        def ran(sent: float) -> None:
            now = time.perf_counter()
            lags.append((now, (now - sent) * 1000))

        while not loop.is_closed():
            try:
                loop.call_soon_threadsafe(ran, time.perf_counter())
            except RuntimeError:
                return
            time.sleep(0.002)
            if len(lags) >= 1000:
                window, lags[:] = sorted(lag for _, lag in lags), []
                over = [sum(1 for v in window if v > ms) for ms in (10, 20)]
                print(f"loop lag at {time.perf_counter():.3f}: p50 {window[500]:.2f} "
                      f"p99 {window[990]:.2f} max {window[-1]:.1f} ms, over 10/20 ms: {over}",
                      file=sys.stderr, flush=True)  # fmt: skip

    def started() -> bool:
        loop = asyncio.get_running_loop()
        threading.Thread(target=probe_thread, args=(loop,), daemon=True).start()
        return freeze()

    node.server.app.freeze_startup_heap = started  # type: ignore[attr-defined]


def _exp_gc_freeze(app: Any) -> None:
    """``gc.freeze()`` before serving: start-up objects leave the collector's generations."""
    import gc

    gc.collect()
    gc.freeze()


def _exp_no_call_records(app: Any) -> None:
    """No ``a2a_node_calls`` (issue 12): tasks keep no call records, their updates no metadata."""
    import node.executor

    node.executor.calls_of = lambda updater: None  # type: ignore[assignment]


def _exp_json_format_parse(app: Any) -> None:
    """The SDK's JSON-RPC dispatcher parses params with json_format.ParseDict again (A/B of
    node.server.proto_json.parse_dict)."""
    from a2a.server.routes import jsonrpc_dispatcher
    from google.protobuf import json_format

    jsonrpc_dispatcher.ParseDict = json_format.ParseDict  # type: ignore[attr-defined]


def _exp_asgi_time(app: Any) -> None:
    """Print, every 1,000 requests to stderr, how long a request waited from its first parsed
    byte to its ASGI call ("parse->asgi") and how long the app took to its last body message
    ("asgi time"), p50/p99/max. Beside wrk's latency: a tail wrk sees and neither of these
    does was spent before the server read the request (the loop's scheduling)."""
    from uvicorn.protocols.http import httptools_impl

    protocol = httptools_impl.HttpToolsProtocol
    begin, headers_done = protocol.on_message_begin, protocol.on_headers_complete

    def on_message_begin(self: Any) -> None:
        self._bench_t0 = time.perf_counter()
        begin(self)

    def on_headers_complete(self: Any) -> None:
        headers_done(self)
        self.scope["bench_t0"] = self._bench_t0

    protocol.on_message_begin = on_message_begin  # type: ignore[method-assign]
    protocol.on_headers_complete = on_headers_complete  # type: ignore[method-assign]
    waits: list[float] = []
    times: list[float] = []

    def report(what: str, values: list[float]) -> None:
        window = sorted(values)
        values.clear()
        print(f"{what}: p50 {window[500]:.1f} p99 {window[990]:.1f} max {window[-1]:.1f} ms",
              file=sys.stderr, flush=True)  # fmt: skip

    call = type(app).__call__

    async def timed(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await call(self, scope, receive, send)
        started = time.perf_counter()
        waits.append((started - scope.get("bench_t0", started)) * 1000)
        if len(waits) >= 1000:
            report("parse->asgi", waits)

        async def sending(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                times.append((time.perf_counter() - started) * 1000)
                if len(times) >= 1000:
                    report("asgi time", times)

        await call(self, scope, receive, sending)

    type(app).__call__ = timed  # type: ignore[method-assign]


def _exp_loop_gap(app: Any) -> None:
    """Print every gap over 100 ms between two runs of a 1 ms repeating loop callback."""
    import asyncio

    import node.server.app

    freeze = node.server.app.freeze_startup_heap

    def started() -> bool:
        loop = asyncio.get_running_loop()
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            gap = (now - last[0]) * 1000
            if gap > 100:
                print(f"loop gap {gap:.0f} ms at {now:.3f}", file=sys.stderr, flush=True)
            last[0] = now
            loop.call_later(0.001, tick)

        loop.call_soon(tick)
        return freeze()

    node.server.app.freeze_startup_heap = started  # type: ignore[attr-defined]


def _exp_writer_batches(app: Any) -> None:
    """Print, every 500 batches to stderr, how many jobs the SQLite writer thread committed per
    batch (mean, max) and its thread CPU per job."""
    from node.store import sqlite_writer

    run = sqlite_writer.SqliteWriter._run
    sizes: list[int] = []
    cpu = [time.thread_time()]

    def _run(self: Any, batch: Any) -> None:
        run(self, batch)
        sizes.append(len(batch))
        if len(sizes) >= 500:
            now = time.thread_time()
            print(f"writer: {sum(sizes) / len(sizes):.1f} jobs per batch (max {max(sizes)}), "
                  f"{(now - cpu[0]) * 1e6 / sum(sizes):.0f} us thread CPU per job",
                  file=sys.stderr, flush=True)  # fmt: skip
            sizes.clear()
            cpu[0] = now

    sqlite_writer.SqliteWriter._run = _run  # type: ignore[method-assign]


EXPERIMENTS: dict[str, Callable[[Any], None]] = {
    "writer_batches": _exp_writer_batches,
    "loop_gap": _exp_loop_gap,
    "asgi_time": _exp_asgi_time,
    "json_format_parse": _exp_json_format_parse,
    "no_call_records": _exp_no_call_records,
    "gc_log": _exp_gc_log,
    "gc_freeze": _exp_gc_freeze,
    "loop_lag": _exp_loop_lag,
    "no_guards": _exp_no_guards,
    "no_autocheckpoint": _exp_no_autocheckpoint,
}


def serve(kind: str, port: int, data_dir: Path) -> None:
    """The ``--serve`` entry: build one server and run it until SIGTERM."""
    from node.server.serve import make_server

    app = SERVERS[kind](data_dir, port)
    if kind in ("b", "c", "e", "f", "h"):
        for name in _experiments():
            EXPERIMENTS[name](app)
    loop = os.environ.get("BENCH_LOOP", "auto")
    http = os.environ.get("BENCH_HTTP", "auto")
    server = make_server(app, "127.0.0.1", port, loop=loop, http=http)  # type: ignore[arg-type]
    profile_to = os.environ.get("BENCH_PROFILE")
    if not profile_to:
        server.run()
        return
    import cProfile

    # uvicorn re-raises the captured SIGTERM after shutdown; a no-op handler lets us dump first
    signal.signal(signal.SIGTERM, lambda *_: None)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        server.run()
    finally:
        profiler.disable()
        profiler.dump_stats(profile_to)


# -- the driver ---------------------------------------------------------------------------------


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    ok: int
    errors: int  # bad status + JSON-RPC errors + not completed + socket errors + non-2xx
    detail: str
    elapsed_s: float = 0.0
    server_cpu_s: float = 0.0  # CPU time of the server process during the run
    other_cpu_s: float = 0.0  # CPU0 time used by anything else (other processes, interrupts)

    @property
    def valid(self) -> bool:
        return self.errors == 0 and self.ok == self.requests > 0

    @property
    def server_cpu_pct(self) -> float:
        return 100 * self.server_cpu_s / self.elapsed_s

    @property
    def other_cpu_pct(self) -> float:
        return 100 * self.other_cpu_s / self.elapsed_s

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.server_cpu_s / max(self.requests, 1)


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)([a-z]+)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse_wrk(out: str) -> WrkResult:
    """Requests/sec, p50/p99 from --latency, and every error count wrk or the script reports."""
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    check = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", out.split("A2A-CHECK", 1)[1]))
    socket_errors = re.search(r"Socket errors: (.*)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1))) if socket_errors else 0
    errors = (
        check["bad_status"]
        + check["rpc_errors"]
        + check["not_completed"]
        + sock
        + (int(non2xx.group(1)) if non2xx else 0)
    )
    detail = ", ".join(f"{k}={v}" for k, v in check.items() if k != "ok")
    detail += f", socket={sock}" if socket_errors else ""
    return WrkResult(rps, p50, p99, requests, check["ok"], errors, detail)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu0_busy_seconds() -> float:
    """Busy time of the server's CPU (all processes), from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{SERVER_CPU} "):
            ticks = [int(x) for x in line.split()[1:9]]
            return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    raise RuntimeError(f"no cpu{SERVER_CPU} in /proc/stat")


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024  # type: ignore[union-attr]


def post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


@contextlib.contextmanager
def running_server(
    kind: str, data_dir: Path, env: dict[str, str], nice: int = 0, deadline_s: float = 30.0
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Start one server pinned to CPU0, poll until it answers, stop it with SIGTERM."""
    port = free_port()
    niced = ["nice", "-n", str(nice)] if nice else []
    cmd = [*niced, "taskset", "-c", SERVER_CPU, sys.executable, __file__, "--serve", kind]
    cmd += ["--port", str(port), "--data-dir", str(data_dir)]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server {kind} exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(base + READY_PATH.get(kind, "/readyz"), timeout=1):
                    break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server {kind} not ready after {deadline_s} s") from None
                time.sleep(0.02)
        yield proc, base + "/"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_one(url: str) -> None:
    """One request by hand, so a broken server fails loudly before any load is applied."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [CALC_PART]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = post_json(url, body)
    state = reply.get("result", {}).get("task", {}).get("status", {}).get("state")
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"sanity request failed: {json.dumps(reply)[:2000]}")


def run_wrk(url: str, pid: int, args: argparse.Namespace, duration: float) -> WrkResult:
    niced = ["nice", "-n", str(args.nice)] if args.nice else []
    cmd = [*niced, "taskset", "-c", WRK_CPU, args.wrk, "-t1", f"-c{args.connections}"]
    cmd += [f"-d{duration:g}s", "--latency", f"--timeout={args.timeout:g}s"]
    cmd += ["-s", str(LUA), url, "--", "calculate"]
    server0, busy0, start = cpu_seconds(pid), cpu0_busy_seconds(), time.monotonic()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    elapsed = time.monotonic() - start
    server = cpu_seconds(pid) - server0
    other = cpu0_busy_seconds() - busy0 - server
    if args.verbose:
        print(out)
    result = parse_wrk(out)
    result.elapsed_s, result.server_cpu_s, result.other_cpu_s = elapsed, server, max(0.0, other)
    return result


def bench_one(kind: str, tmp: Path, env: dict[str, str], args: argparse.Namespace) -> WrkResult:
    data_dir = tmp / kind
    data_dir.mkdir(parents=True)
    server_env = dict(env)
    if args.profile:
        server_env["BENCH_PROFILE"] = str(Path(args.profile).resolve() / f"{kind}.prof")
        # a profile of a later round replaces the earlier one
    with running_server(kind, data_dir, server_env, args.nice) as (proc, url):
        check_one(url)
        run_wrk(url, proc.pid, args, args.warmup)
        return run_wrk(url, proc.pid, args, args.duration)


def idle_rss(tmp: Path, env: dict[str, str]) -> float:
    """VmRSS of a b-style node right after it reports ready (no request served yet)."""
    data_dir = tmp / "rss"
    data_dir.mkdir()
    with running_server("b", data_dir, env) as (proc, _):
        return rss_mb(proc.pid)


def machine_facts(args: argparse.Namespace) -> list[str]:
    from importlib.metadata import version

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "?",
    )
    wrk = subprocess.run([args.wrk, "-v"], capture_output=True, text=True).stdout.split("\n")[0]
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "node", "tools"], capture_output=True, text=True
    ).stdout.strip()
    http = args.http if args.http != "auto" else "httptools" if _importable("httptools") else "h11"
    loop = args.loop if args.loop != "auto" else "uvloop" if _importable("uvloop") else "asyncio"
    return [
        f"machine: {os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}",
        f"python {platform.python_version()}, a2a-sdk {version('a2a-sdk')}, "
        f"uvicorn {version('uvicorn')} ({loop}+{http}), starlette {version('starlette')}",
        f"{wrk.strip()}; server on CPU{SERVER_CPU}, wrk on CPU{WRK_CPU}",
        f"wrk -t1 -c{args.connections} -d{args.duration:g}s --latency --timeout={args.timeout:g}s"
        f" (warm-up {args.warmup:g}s discarded); OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false; "
        f"nice {args.nice}",
        f"load average before: {Path('/proc/loadavg').read_text().split()[:3]}; git "
        f"{head.stdout.strip()}{' (node/ or tools/ modified)' if dirty else ''}",
    ]


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def print_profiles(directory: Path, limit: int) -> None:
    import pstats

    for prof in sorted(directory.glob("*.prof")):
        print(f"\n===== profile {prof.stem}: {KINDS[prof.stem]} (tottime) =====")
        stats = pstats.Stats(str(prof))
        stats.sort_stats("tottime").print_stats(limit)
        print(f"===== profile {prof.stem} (cumulative) =====")
        stats.sort_stats("cumulative").print_stats(limit)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", choices=sorted(SERVERS), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="discarded warm-up seconds")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=10.0, help="wrk request timeout (s)")
    parser.add_argument("--only", default="a,b,c,d", help="servers to run, e.g. a,b")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all servers N times")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "/usr/bin/wrk")
    parser.add_argument("--profile", metavar="DIR", help="run the servers under cProfile")
    parser.add_argument("--profile-lines", type=int, default=30)
    parser.add_argument("--experiment", default="", help=f"one of {sorted(EXPERIMENTS)}, comma")
    parser.add_argument("--no-rss", action="store_true", help="skip the idle RSS measurement")
    parser.add_argument(
        "--nice", type=int, default=0, help="niceness of servers and wrk (root: <0)"
    )
    parser.add_argument("--verbose", action="store_true", help="print wrk's raw output")
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="asyncio",
        help="every server's loop (default asyncio: a node's own, and the bare SDK's cheaper one)",
    )
    parser.add_argument(
        "--http",
        choices=("auto", "h11", "httptools"),
        default="auto",
        help="every server's parser",
    )
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.data_dir)
        return 0

    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [
        k
        for k in kinds + [e for e in args.experiment.split(",") if e]
        if k not in {**KINDS, **EXPERIMENTS}
    ]
    if unknown:
        parser.error(f"unknown server or experiment: {', '.join(unknown)}")
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false", "PYTHONUNBUFFERED": "1"}
    if args.experiment:
        env["BENCH_EXPERIMENT"] = args.experiment
    env["BENCH_LOOP"], env["BENCH_HTTP"] = args.loop, args.http
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    for line in machine_facts(args):
        print(line)
    label = ""
    if args.profile:
        label = " [PROFILED: not benchmark results]"
    if args.experiment:
        label += f" [EXPERIMENT {args.experiment}: not benchmark results]"

    rounds: list[dict[str, WrkResult]] = []
    with tempfile.TemporaryDirectory(prefix="a2a-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for n in range(args.rounds):
            results: dict[str, WrkResult] = {}
            for kind in kinds:
                results[kind] = r = bench_one(kind, tmp / f"round{n}", env, args)
                print(f"  round {n + 1} {kind}: {r.rps:.0f} req/s", flush=True)
            rounds.append(results)
        rss = None if args.no_rss else idle_rss(tmp, env)

    for n, results in enumerate(rounds):
        print(f"\nRound {n + 1}/{args.rounds}: blocking SendMessage, c={args.connections}{label}")
        print_round(results)
    if rss is not None:
        verdict = "met" if rss <= RSS_TARGET_MB else "MISSED"
        print(
            f"\nidle RSS of a node (b-style, after startup): {rss:.1f} MB "
            f"(target <= {RSS_TARGET_MB:g} MB: {verdict})"
        )
    if args.profile:
        print_profiles(Path(args.profile), args.profile_lines)
    return 0 if all(r.valid for results in rounds for r in results.values()) else 1


def print_round(results: dict[str, WrkResult]) -> None:
    """The table of one round, then the target ratios (req/s) and the CPU-cost ratios."""
    print(
        f"{'':4}{'server':<50}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'srv CPU':>8}"
        f"{'other':>7}{'CPU ms/req':>11}{'ok/requests':>13}  errors"
    )
    for kind, r in results.items():
        status = "" if r.valid else "  INVALID"
        print(
            f"({kind}) {KINDS[kind]:<50}{r.rps:>8.1f}{r.p50_ms:>8.1f}{r.p99_ms:>8.1f}"
            f"{r.server_cpu_pct:>7.0f}%{r.other_cpu_pct:>6.0f}%{r.cpu_ms_per_request:>11.2f}"
            f"{f'{r.ok}/{r.requests}':>13}  {r.errors} ({r.detail}){status}"
        )
    for top, bottom, target in TARGETS:
        if top in results and bottom in results:
            ratio = results[top].rps / results[bottom].rps
            cost = results[bottom].cpu_ms_per_request / results[top].cpu_ms_per_request
            verdict = "met" if ratio >= target else "MISSED"
            print(
                f"({top})/({bottom}) = {ratio:.2f} req/s (target >= {target:g}: {verdict}); "
                f"by server CPU per request: {cost:.2f}"
            )
    for kind, factor in TAIL_TARGETS.items():
        if kind in results:
            r = results[kind]
            verdict = "met" if r.p99_ms <= factor * r.p50_ms else "MISSED"
            print(f"({kind}) p99/p50 = {r.p99_ms / r.p50_ms:.2f} (target <= {factor:g}: {verdict})")


if __name__ == "__main__":
    sys.exit(main())
