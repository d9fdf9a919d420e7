"""A peer framework side by side (issue 13 §3): the node against fasta2a's A2A server, with wrk.

Run (builds fasta2a's environment once, then every server one after another, N rounds):

    .venv/bin/python bench/peer_framework.py [--rounds 3] [--duration 10] [--connections 32]
        [--only node,node-sdk,node-mem,sdk,fasta2a,fasta2a-await] [--nice -10] [--py-spy DIR]

Servers (each its own process, pinned to CPU0; wrk on CPU1, as in ``bench/node_throughput.py``,
whose helpers this script imports):

- ``node``: ``a2a-node serve`` of a card with only the built-in ``calculate`` tool, its default
  durable SQLite store (a temp data dir), lean path on (the default);
- ``node-sdk``: the same with ``A2A_NODE_LEAN_PATH=0`` (the SDK's request path);
- ``sdk``: the bare a2a-sdk echo server on ``InMemoryTaskStore`` (``node_throughput.py --serve a``);
- ``node-mem``: as ``node`` with ``--store memory`` (informative: fasta2a keeps tasks in memory);
- ``fasta2a``: fasta2a (``FASTA2A``, from the package index, in its own virtual environment under
  ``bench/.venvs/``, git-ignored) with its ``InMemoryBroker`` and ``InMemoryStorage`` and one
  worker doing the ``calculate`` tool's work for ``1+1``: it marks the task working, adds the two
  numbers, stores the completed task with one artifact ``calculate`` holding ``{"data": 2.0}``
  (the node's artifact) and publishes both to the task's stream;
- ``fasta2a-await``: the same worker awaiting the event loop once before it computes, as any
  worker that awaits I/O (a model, a database) does.

fasta2a answers the A2A 1.0 JSON-RPC method names (``SendMessage``, ``SendStreamingMessage``,
``GetTask``; its ``jsonrpc_v1`` module) beside its older ``message/send`` names, so every server
gets the same request body. But it has no blocking call: ``TaskManager.send_message`` stores a
submitted task, hands it to the broker and answers that task (it reads no blocking flag and drops
``returnImmediately``). Its answer is the storage's own task dict, serialized after the broker's
hand-off; the in-memory broker's stream has no buffer and a worker that never awaits finishes the
task before the handler resumes, so with the trivial worker the answer already shows the task
completed (0 GetTask per call, by that race, not by contract). ``fasta2a-await`` shows the shape a
real worker gets. So a *call* here is what a client does to hold the completed task with its
result (``bench/wrk/peer_calls.lua``), and each figure names its shape:

- ``send``: one blocking ``SendMessage`` (node, node-sdk, node-mem, sdk);
- ``send+get``: ``SendMessage`` then ``GetTask`` until completed (fasta2a; the client's only way
  to the result without a stream; the table gives GetTask requests per call);
- ``stream``: one ``SendStreamingMessage`` whose SSE response ends with the task (node, fasta2a:
  the one shape both serve as one request; the node's lean path is not involved, it serves only
  blocking calls).

wrk runs ``-tC -cC`` (a connection per thread, so a call can span requests) after a discarded
warm-up; every response is checked (2xx, no JSON-RPC error, completed, the right result, or in
``send+get`` still submitted/working, then polled). A run with any wrong answer is INVALID and the
script exits 1. Figures per server and shape: completed calls/s, p50/p99 of a whole call (measured
in the Lua script), server CPU ms per call (from /proc, stays meaningful on a busy machine), and
the share of CPU0 used by anything else. Ratios node/fasta2a per round.

``--py-spy DIR`` samples each server during its measured run (py-spy on the wrk CPU, 250 Hz,
non-blocking) and prints the share of samples per component (``COMPONENTS``); such runs are
labelled and are not benchmark results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import node_throughput as nt  # stdlib-only at import; its helpers, not copies

ROOT = nt.ROOT
LUA = ROOT / "bench" / "wrk" / "peer_calls.lua"
#: fasta2a and the server stack of its environment, pinned; uvicorn, uvloop and httptools at the
#: versions the node's .venv has, so both serve HTTP with the same uvicorn (uvloop + httptools).
FASTA2A = "fasta2a==2.1.1"
VENV_PINS = (FASTA2A, "uvicorn==0.54.0", "uvloop==0.23.0", "httptools==0.9.0")
VENV_DIR = ROOT / "bench" / ".venvs" / FASTA2A.replace("==", "-")
CARD = """\
id: bench
name: Bench Node
description: Throughput benchmark node with one trivial tool.
tools: [calculate]
"""
SERVERS = {
    "node": "node, calculate, SQLite (default), lean path",
    "node-sdk": "node, calculate, SQLite, A2A_NODE_LEAN_PATH=0",
    "sdk": "bare a2a-sdk echo, InMemoryTaskStore",
    "node-mem": "node, calculate, store memory, lean path",
    "fasta2a": f"{FASTA2A}, InMemoryBroker + InMemoryStorage",
    "fasta2a-await": f"{FASTA2A}, same, worker awaits once",
}
#: the shapes each server is driven with, in order (see the module doc)
SHAPES = {
    "node": ("send", "stream"),
    "node-sdk": ("send",),
    "sdk": ("send",),
    "node-mem": ("send",),
    "fasta2a": ("sendget", "stream"),
    "fasta2a-await": ("sendget",),
}
SHAPE_NAME = {"send": "send", "sendget": "send+get", "stream": "stream"}
#: (top, bottom) runs compared in every round: calls/s and server CPU per call
RATIOS = (
    (("node", "send"), ("fasta2a", "sendget")),
    (("node-sdk", "send"), ("fasta2a", "sendget")),
    (("node", "stream"), ("fasta2a", "stream")),
    (("node-mem", "send"), ("fasta2a", "sendget")),
    (("sdk", "send"), ("fasta2a", "sendget")),
    (("node", "send"), ("fasta2a-await", "sendget")),
)


# -- fasta2a's environment and server (the server part runs inside that environment) -------------


def fasta2a_python() -> Path:
    """The fasta2a environment's python, created with ``VENV_PINS`` on first use and reused."""
    python = VENV_DIR / "bin" / "python"
    marker = VENV_DIR / "pins.txt"
    wanted = "\n".join(VENV_PINS) + "\n"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    shutil.rmtree(VENV_DIR, ignore_errors=True)
    print(f"creating {VENV_DIR} with {' '.join(VENV_PINS)}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV_DIR)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *VENV_PINS], check=True)
    marker.write_text(wanted)
    return python


def serve_fasta2a(port: int, awaits: bool) -> None:
    """The ``--serve-fasta2a`` entry (in fasta2a's environment): serve until SIGTERM.

    ``awaits``: the worker yields to the event loop once before computing, as any worker that
    awaits I/O does; without it the trivial worker finishes before ``SendMessage`` answers.
    """
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    import anyio
    import uvicorn
    from fasta2a import FastA2A, Skill, Worker
    from fasta2a.broker import InMemoryBroker
    from fasta2a.schema import Artifact, Message, Part, TaskIdParams, TaskSendParams
    from fasta2a.storage import InMemoryStorage

    class CalculateWorker(Worker[None]):
        """``calculate`` for ``a+b``: working, then completed with the sum as artifact."""

        async def run_task(self, params: TaskSendParams) -> None:
            task_id, context_id = params["id"], params["context_id"]
            await self.storage.update_task(task_id, state="working")
            await self.publish_status(task_id, context_id, "working")
            if awaits:
                await anyio.lowlevel.checkpoint()
            data = next(p["data"] for p in params["message"]["parts"] if "data" in p)
            left, right = data["arguments"]["expression"].split("+")
            part = Part(data=float(left) + float(right))
            artifact = Artifact(artifact_id=str(uuid.uuid4()), name="calculate", parts=[part])
            await self.storage.update_task(task_id, state="completed", new_artifacts=[artifact])
            await self.publish_artifact(task_id, context_id, artifact)

        async def cancel_task(self, params: TaskIdParams) -> None:
            await self.storage.update_task(params["id"], state="canceled")

        def build_message_history(self, history: list[Message]) -> list[Any]:
            return list(history)

        def build_artifacts(self, result: Any) -> list[Artifact]:
            return []

    storage: InMemoryStorage[None] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = CalculateWorker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    skill = Skill(
        id="calculate",
        name="calculate",
        description="Adds two numbers (a+b).",
        tags=["math"],
        input_modes=["application/json"],
        output_modes=["application/json"],
    )
    app = FastA2A(
        storage=storage,
        broker=broker,
        name="Bench fasta2a",
        url=f"http://127.0.0.1:{port}/",
        skills=[skill],
        lifespan=lifespan,
    )
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="on"
    )


# -- the driver -----------------------------------------------------------------------------------


def server_command(kind: str, port: int, data_dir: Path) -> tuple[list[str], str]:
    """The command line of a server and the path polled until it answers."""
    if kind.startswith("fasta2a"):
        cmd = [str(fasta2a_python()), __file__, "--serve-fasta2a", str(port)]
        cmd += ["--fasta2a-await"] if kind == "fasta2a-await" else []
        return cmd, "/.well-known/agent-card.json"
    if kind == "sdk":
        cmd = [sys.executable, str(ROOT / "bench" / "node_throughput.py"), "--serve", "a"]
        return [
            *cmd,
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ], "/.well-known/agent-card.json"
    card = data_dir / "card.yaml"
    card.write_text(CARD)
    cli = str(Path(sys.executable).parent / "a2a-node")
    cmd = [cli, "serve", str(card), "--port", str(port), "--data-dir", str(data_dir)]
    return [*cmd, "--store", "memory" if kind == "node-mem" else "sqlite"], "/readyz"


@contextlib.contextmanager
def running(
    kind: str, data_dir: Path, env: dict[str, str], nice: int, deadline_s: float = 120.0
) -> Iterator[tuple[int, str]]:
    """Start one server pinned to CPU0, poll until it answers, stop it with SIGTERM."""
    port = nt.free_port()
    cmd, ready = server_command(kind, port, data_dir)
    niced = ["nice", "-n", str(nice)] if nice else []
    server_env = dict(env)
    if kind == "node-sdk":
        server_env["A2A_NODE_LEAN_PATH"] = "0"
    proc = subprocess.Popen(
        [*niced, "taskset", "-c", nt.SERVER_CPU, *cmd], env=server_env, cwd=ROOT
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + deadline_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server {kind} exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(base + ready, timeout=1):
                    break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server {kind} not ready after {deadline_s} s") from None
                time.sleep(0.05)
        yield proc.pid, base + "/"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rpc(url: str, method: str, params: dict[str, Any]) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.read().decode())


def check_one(url: str, shape: str, expect: str) -> None:
    """One call by hand, so a broken server or shape fails loudly before any load."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [nt.CALC_PART]}
    method = "SendStreamingMessage" if shape == "stream" else "SendMessage"
    reply = rpc(url, method, {"message": message})
    deadline = time.monotonic() + 10
    while shape == "sendget" and "TASK_STATE_COMPLETED" not in reply:
        task_id = json.loads(reply)["result"].get("task", json.loads(reply)["result"])["id"]
        if time.monotonic() > deadline:
            raise RuntimeError(f"task {task_id} not completed after 10 s: {reply[:2000]}")
        reply = rpc(url, "GetTask", {"id": task_id})
    wanted = r'"parts":\s*\[\{"data":\s*2\.0\}\]' if expect == "calc" else r'"text":\s*"echo: '
    if "TASK_STATE_COMPLETED" not in reply or not re.search(wanted, reply):
        raise RuntimeError(
            f"{shape} call: not a completed task with the right result: {reply[:2000]}"
        )


@dataclass
class Run:
    calls: int
    ok: int
    polls: int
    errors: int
    detail: str
    elapsed_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    other_cpu_s: float
    connections: int

    @property
    def valid(self) -> bool:
        # calls cut by the end of the run are not errors: at most one per connection
        return self.errors == 0 and self.ok > 0 and self.calls - self.ok <= self.connections

    @property
    def calls_per_s(self) -> float:
        return self.ok / self.elapsed_s

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.server_cpu_s / max(self.ok, 1)

    @property
    def other_pct(self) -> float:
        return 100 * self.other_cpu_s / self.elapsed_s


def parse(out: str, connections: int) -> Run:
    check = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", out.split("PEER-CHECK", 1)[1])}
    elapsed = nt._ms(re.search(r"requests in ([\d.]+\w+)", out).group(1)) / 1000  # type: ignore[union-attr]
    socket_errors = re.search(r"Socket errors: (.*)", out)
    sock = sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1))) if socket_errors else 0
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = ("bad_status", "rpc_errors", "not_completed", "wrong_result", "overlaps")
    errors = sum(check[k] for k in bad) + sock + (int(non2xx.group(1)) if non2xx else 0)
    detail = ", ".join(f"{k}={check[k]}" for k in bad) + f", socket={sock}"
    return Run(
        check["calls"], check["ok"], check["polls"], errors, detail, elapsed,
        check["p50_us"] / 1000, check["p99_us"] / 1000, 0.0, 0.0, connections,
    )  # fmt: skip


def run_wrk(
    url: str,
    pid: int,
    shape: str,
    expect: str,
    duration: float,
    args: argparse.Namespace,
    spy_to: Path | None = None,
) -> Run:
    niced = ["nice", "-n", str(args.nice)] if args.nice else []
    c = args.connections
    cmd = [*niced, "taskset", "-c", nt.WRK_CPU, args.wrk, f"-t{c}", f"-c{c}", f"-d{duration:g}s"]
    cmd += [f"--timeout={args.timeout:g}s", "-s", str(LUA), url, "--", shape, expect]
    spy = None
    if spy_to is not None:  # py-spy on the wrk CPU, sampling without pausing the server
        spy_cmd = ["taskset", "-c", nt.WRK_CPU, args.py_spy_bin, "record", "--format", "raw"]
        spy_cmd += ["--nonblocking", "-r", "250", "-d", f"{duration:g}", "-p", str(pid)]
        spy = subprocess.Popen([*spy_cmd, "-o", str(spy_to)], stdout=subprocess.DEVNULL)
    server0, busy0 = nt.cpu_seconds(pid), nt.cpu0_busy_seconds()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if spy is not None and spy.wait(timeout=duration + 60) != 0:
        raise RuntimeError(f"py-spy failed on {shape} (exit {spy.returncode})")
    server = nt.cpu_seconds(pid) - server0
    other = nt.cpu0_busy_seconds() - busy0 - server
    run = parse(out, c)
    run.server_cpu_s, run.other_cpu_s = server, max(0.0, other)
    if args.verbose or not run.valid:
        print(out, flush=True)
    return run


def bench_server(
    kind: str, tmp: Path, env: dict[str, str], args: argparse.Namespace
) -> dict[str, Run]:
    data_dir = tmp / kind
    data_dir.mkdir(parents=True)
    expect = "echo" if kind == "sdk" else "calc"
    runs: dict[str, Run] = {}
    with running(kind, data_dir, env, args.nice) as (pid, url):
        for shape in SHAPES[kind]:
            check_one(url, shape, expect)
            run_wrk(url, pid, shape, expect, args.warmup, args)
            spy_to = Path(args.py_spy) / f"{kind}-{shape}.txt" if args.py_spy else None
            runs[shape] = run = run_wrk(url, pid, shape, expect, args.duration, args, spy_to)
            print(f"  {kind} {SHAPE_NAME[shape]}: {run.calls_per_s:.0f} calls/s", flush=True)
    return runs


def print_round(results: dict[tuple[str, str], Run]) -> None:
    print(
        f"{'server':<48}{'shape':>9}{'calls/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'CPU ms/call':>12}"
        f"{'other':>7}{'GetTask/call':>13}{'ok/calls':>13}  errors"
    )
    for (kind, shape), r in results.items():
        polls = f"{r.polls / max(r.ok, 1):.2f}" if shape == "sendget" else "-"
        print(
            f"{SERVERS[kind]:<48}{SHAPE_NAME[shape]:>9}{r.calls_per_s:>9.1f}{r.p50_ms:>8.1f}"
            f"{r.p99_ms:>8.1f}{r.cpu_ms_per_call:>12.2f}{r.other_pct:>6.0f}%{polls:>13}"
            f"{f'{r.ok}/{r.calls}':>13}  {r.errors} ({r.detail}){'' if r.valid else '  INVALID'}"
        )
    for top, bottom in RATIOS:
        if top in results and bottom in results:
            t, b = results[top], results[bottom]
            rps, cpu = t.calls_per_s / b.calls_per_s, b.cpu_ms_per_call / t.cpu_ms_per_call
            ahead = "ahead" if rps > 1 and cpu > 1 else "NOT ahead on both"
            print(
                f"{top[0]} {SHAPE_NAME[top[1]]} / {bottom[0]} {SHAPE_NAME[bottom[1]]}: "
                f"{rps:.2f}x calls/s, {cpu:.2f}x by server CPU per call ({top[0]} {ahead})"
            )


#: where a sample's CPU goes: the innermost frame whose file (as py-spy names it, relative to
#: its sys.path entry) starts with one of these; stdlib frames (json, asyncio, uuid) are charged to
#: the library that called them; none (the loop's own C code, the interpreter's start): "loop"
COMPONENTS = (
    ("node/store", ("node/store/",)),
    ("node/server", ("node/server/",)),
    ("node (other), tools", ("node/", "tools/")),
    ("fasta2a", ("fasta2a/",)),
    ("a2a-sdk", ("a2a/",)),
    ("protobuf", ("google/protobuf/",)),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("sse-starlette", ("sse_starlette/",)),
    ("starlette", ("starlette/",)),
    ("uvicorn", ("uvicorn/protocols/", "uvicorn/middleware/")),
    ("opentelemetry, prometheus", ("opentelemetry/", "prometheus_client/")),
    ("anyio", ("anyio/",)),
)
_FILE = re.compile(r"\(([^()]+):\d+\)$")


def component(stack: str) -> str:
    for frame in reversed(stack.split(";")):
        found = _FILE.search(frame)
        path = found.group(1) if found else ""
        for name, prefixes in COMPONENTS:
            if path.startswith(prefixes):
                return name
    return "loop"


def print_py_spy(directory: Path) -> None:
    """Per profiled run: the share of samples per component (innermost matching frame)."""
    for path in sorted(directory.glob("*.txt")):
        counts: dict[str, int] = {}
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack and n.isdigit():
                counts[component(stack)] = counts.get(component(stack), 0) + int(n)
        total = sum(counts.values()) or 1
        shares = sorted(counts.items(), key=lambda kv: -kv[1])
        print(f"\npy-spy {path.stem} ({total} samples): " + ", ".join(
            f"{name} {100 * n / total:.0f} %" for name, n in shares
        ))  # fmt: skip


def facts(args: argparse.Namespace, python: Path) -> list[str]:
    from importlib.metadata import version

    fasta2a = subprocess.run(
        [str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout.split()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    wanted = ("fasta2a", "uvicorn", "uvloop", "httptools", "starlette", "pydantic=")
    return [
        f"node: a2a-sdk {version('a2a-sdk')}, uvicorn {version('uvicorn')}, starlette "
        f"{version('starlette')}; git {head}",
        "fasta2a env: " + ", ".join(p for p in fasta2a if p.startswith(wanted)),
        f"server on CPU{nt.SERVER_CPU}, wrk on CPU{nt.WRK_CPU}: wrk -t{args.connections} "
        f"-c{args.connections} -d{args.duration:g}s --timeout={args.timeout:g}s (warm-up "
        f"{args.warmup:g}s discarded), nice {args.nice}; "
        "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false",
    ]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve-fasta2a", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--fasta2a-await", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="discarded warm-up seconds")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=10.0, help="wrk request timeout (s)")
    parser.add_argument("--only", default=",".join(SERVERS), help="servers to run, comma")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wrk", default=shutil.which("wrk") or "/usr/bin/wrk")
    parser.add_argument("--nice", type=int, default=0, help="niceness of servers and wrk")
    parser.add_argument("--verbose", action="store_true", help="print wrk's raw output")
    parser.add_argument(
        "--py-spy", metavar="DIR", help="sample each server with py-spy (figures not results)"
    )
    parser.add_argument(
        "--py-spy-bin",
        default=shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
    )
    args = parser.parse_args()
    if args.serve_fasta2a:
        serve_fasta2a(args.serve_fasta2a, args.fasta2a_await)
        return 0
    kinds = [k.strip() for k in args.only.split(",") if k.strip()]
    if unknown := [k for k in kinds if k not in SERVERS]:
        parser.error(f"unknown server: {', '.join(unknown)}")

    if args.py_spy:
        Path(args.py_spy).mkdir(parents=True, exist_ok=True)
    python = fasta2a_python()
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false", "PYTHONUNBUFFERED": "1"}
    env.pop("A2A_NODE_LEAN_PATH", None)
    for line in facts(args, python):
        print(line, flush=True)
    rounds: list[tuple[str, dict[tuple[str, str], Run], str]] = []
    with tempfile.TemporaryDirectory(prefix="a2a-peer-bench-") as tmp_name:
        for n in range(args.rounds):
            before, results = loadavg(), {}
            for kind in kinds:
                runs = bench_server(kind, Path(tmp_name) / f"round{n}", env, args)
                results.update({(kind, shape): run for shape, run in runs.items()})
            rounds.append((before, results, loadavg()))
    label = " [PY-SPY SAMPLED: not benchmark results]" if args.py_spy else ""
    for n, (before, results, after) in enumerate(rounds):
        print(
            f"\nRound {n + 1}/{args.rounds} (c={args.connections}; "
            f"load average {before} -> {after}){label}"
        )
        print_round(results)
    if args.py_spy:
        print_py_spy(Path(args.py_spy))
    invalid = [
        f"round {n + 1} {kind} {SHAPE_NAME[shape]}"
        for n, (_, results, _) in enumerate(rounds)
        for (kind, shape), run in results.items()
        if not run.valid
    ]
    if invalid:
        print(f"\nFAILED: wrong or missing answers in {', '.join(invalid)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
