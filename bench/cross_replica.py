"""Two node replicas on one PostgreSQL: cross-replica event latency, cancel, kill -9 (issue 10 §6).

Run (needs ``A2A_NODE_TEST_PG_URL``; makes and drops a schema of its own):

    source /tmp/pgenv; .venv/bin/python bench/cross_replica.py [--streams 200] [--cancels 100]
        [--at-once 10] [--staggered] [--no-kill]

Two ``a2a-node serve`` processes (card: ``http_fetch``, loopback allowed) share a fresh schema.
Each task fetches its own page of a local server (``/hang/<n>``) that answers only when the bench
releases it, and records when the fetching client went away.

- **events**: a task is sent to A (``returnImmediately``); once WORKING, SubscribeToTask opens on
  A (the SDK's local tap) and on B (our event stream over LISTEN/NOTIFY); the page is released; the
  figure is, per task, the time B's stream delivered the final event minus A's (same clock, same
  client process). Tasks run ``--at-once`` (10) at a time: the batch is set up, then its pages
  are released together, so the burst of completions is measured without the setup of other
  tasks (``--staggered``: each page as soon as its own streams are open, as before 2026-12-02;
  ``--at-once 1``: one task alone). Also counted: B streams that closed on COMPLETED.
  Also, per status update B's stream delivers, receipt wall time minus the ``status.timestamp``
  A stamped on it (the latency from the emit; the same on A's local tap for comparison), and
  each replica's CPU per event task (``/proc``; unlike latency, not inflated by other load).
- **cancel**: a task on A is canceled through B; the figure is the time from the cancel call to
  A's fetch going away; afterwards the page is released and the task must still be CANCELED.
- **kill -9**: a task runs on A, A is killed; the figure is the time until B reports it FAILED
  (lease ``?lease_s=15``, the default).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import aclosing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
import uvicorn  # noqa: E402
from a2a.types import SubscribeToTaskRequest, TaskState  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from node.client import NodeClient, skill_message  # noqa: E402

S = TaskState
CARD = """
id: replicated
name: Replicated
description: One node served by two replicas.
tools: [http_fetch]
network:
  allow_cidrs: ["127.0.0.0/8"]
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Pages:
    """``/hang/<n>``: answers once released; records when the client went away."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.gone: dict[str, float] = {}

    def app(self) -> Starlette:
        async def hang(request: Request) -> PlainTextResponse:
            # Waits on events, not a poll: the bench's client shares this process and loop.
            key = request.path_params["key"]
            release = self.release.setdefault(key, asyncio.Event())
            released = asyncio.ensure_future(release.wait())
            gone = asyncio.ensure_future(disconnected(request))
            await asyncio.wait((released, gone), timeout=60, return_when=asyncio.FIRST_COMPLETED)
            if gone.done():
                self.gone[key] = time.monotonic()
            released.cancel()
            gone.cancel()
            return PlainTextResponse("done")

        return Starlette(routes=[Route("/hang/{key}", hang)])


async def disconnected(request: Request) -> None:
    """Returns when the client of ``request`` (a GET: its body is empty) goes away."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def cpu_s(proc: subprocess.Popen[bytes]) -> float:
    """CPU seconds (user + system) ``proc`` has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=1) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(f"{url}/readyz")).is_success:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise TimeoutError(url)


def replica(card: Path, data: Path, store: str, port: int) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "node.cli", "serve", str(card), "--port", str(port),
            "--data-dir", str(data), "--store", store]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def start(client: NodeClient, page: str) -> str:
    message = skill_message("http_fetch", {"url": page})
    events = [e async for e in client.events(message, return_immediately=True)]
    task_id: str = events[0].task.id
    await client.wait_for_state(task_id, S.TASK_STATE_WORKING)
    return task_id


async def final_at(
    client: NodeClient, task_id: str, opened: asyncio.Event, lags: list[float] | None = None
) -> tuple[float, bool]:
    """When the subscription delivered its last event, and whether that was COMPLETED.

    ``lags`` gets, per live status update, receive wall time minus the ``status.timestamp`` the
    running replica stamped on it (ms; same host clock).
    """
    last, state = 0.0, 0
    async with aclosing(client.client.subscribe(SubscribeToTaskRequest(id=task_id))) as stream:
        async for event in stream:
            opened.set()
            last = time.monotonic()
            now_ns = time.time_ns()
            if lags is not None and event.HasField("status_update"):
                stamp = event.status_update.status.timestamp.ToNanoseconds()
                lags.append((now_ns - stamp) / 1e6)
            for name in ("task", "status_update"):
                if event.HasField(name):
                    state = getattr(event, name).status.state
    return last, state == S.TASK_STATE_COMPLETED


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace) -> None:
    pg = os.environ["A2A_NODE_TEST_PG_URL"]
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(pg)
    await conn.execute(f"CREATE SCHEMA {schema}")
    tmp = Path(tempfile.mkdtemp())
    card = tmp / "card.yaml"
    card.write_text(CARD)
    store = f"{pg}?search_path={schema}"
    pages = Pages()
    page_port = free_port()
    page_server = uvicorn.Server(
        uvicorn.Config(pages.app(), port=page_port, log_level="warning", access_log=False)
    )
    serving = asyncio.create_task(page_server.serve())
    ports = free_port(), free_port()
    procs = [replica(card, tmp / n, store, p) for n, p in zip("ab", ports, strict=True)]
    a_url, b_url = (f"http://127.0.0.1:{p}" for p in ports)
    try:
        await ready(a_url)
        await ready(b_url)
        async with (
            NodeClient.connect(a_url, streaming=False) as plain_a,
            NodeClient.connect(a_url) as on_a,
            NodeClient.connect(b_url) as on_b,
        ):

            async def one_stream(
                n: int, armed: asyncio.Event, go: asyncio.Event
            ) -> tuple[float, bool]:
                try:
                    return await measure_stream(n, armed, go)
                except Exception as exc:  # counted, not fatal: the figure says how many
                    print(f"  task s{n}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    pages.release.setdefault(f"s{n}", asyncio.Event()).set()
                    return float("nan"), False
                finally:
                    armed.set()

            async def measure_stream(
                n: int, armed: asyncio.Event, go: asyncio.Event
            ) -> tuple[float, bool]:
                key = f"s{n}"
                task_id = await start(plain_a, f"http://127.0.0.1:{page_port}/hang/{key}")
                opened = asyncio.Event(), asyncio.Event()
                if args.local_tap:
                    local = asyncio.create_task(final_at(on_a, task_id, opened[0], local_lags))
                else:
                    local = asyncio.ensure_future(asyncio.sleep(0, (float("nan"), False)))
                    opened[0].set()
                remote = asyncio.create_task(final_at(on_b, task_id, opened[1], emit_lags))
                await asyncio.wait_for(asyncio.gather(opened[0].wait(), opened[1].wait()), 30)
                armed.set()
                await go.wait()
                pages.release.setdefault(key, asyncio.Event()).set()
                (t_a, _), (t_b, ok) = await asyncio.wait_for(asyncio.gather(local, remote), 60)
                return (t_b - t_a) * 1000, ok

            cpu_before = [cpu_s(p) for p in procs]
            deltas: list[float] = []
            emit_lags: list[float] = []
            local_lags: list[float] = []
            closed = 0
            burst_cpu = [0.0, 0.0]  # CPU of A and B from the release to the batch's final events
            for first in range(0, args.streams, args.at_once):
                batch = range(first, min(first + args.at_once, args.streams))
                armed, go = [asyncio.Event() for _ in batch], asyncio.Event()
                if args.staggered:
                    go.set()
                runs = [one_stream(n, a, go) for n, a in zip(batch, armed, strict=True)]
                gathered = asyncio.gather(*runs)
                await asyncio.wait_for(asyncio.gather(*(a.wait() for a in armed)), 90)
                at_go = [cpu_s(p) for p in procs]
                go.set()  # every task of the batch is set up: release their pages together
                results = await gathered
                for i, p in enumerate(procs):
                    burst_cpu[i] += cpu_s(p) - at_go[i]
                for delta, ok in results:
                    if delta == delta:  # not NaN
                        deltas.append(delta)
                    closed += ok
            if deltas:
                print(
                    f"events: {len(deltas)} tasks; final event on B after A's local tap: "
                    f"p50 {pct(deltas, 0.5):.1f} ms, p99 {pct(deltas, 0.99):.1f} ms, "
                    f"max {max(deltas):.1f} ms, mean {statistics.mean(deltas):.1f} ms"
                )
            tap = (
                f"on A's local tap: p50 {pct(local_lags, 0.5):.1f} ms, "
                f"p99 {pct(local_lags, 0.99):.1f} ms"
                if local_lags
                else "no subscription on A"
            )
            print(
                f"events from the emit: {len(emit_lags)} status updates received on B minus "
                f"A's status.timestamp: p50 {pct(emit_lags, 0.5):.1f} ms, "
                f"p99 {pct(emit_lags, 0.99):.1f} ms, max {max(emit_lags):.1f} ms ({tap}); "
                f"B streams closed on COMPLETED: {closed}/{args.streams}; "
                f"{args.at_once} at once{' (staggered)' if args.staggered else ''}; "
                f"load average {os.getloadavg()[0]:.2f}"
            )
            a_cpu, b_cpu = (
                1000 * (cpu_s(p) - c) / args.streams for p, c in zip(procs, cpu_before, strict=True)
            )
            a_end, b_end = (1000 * c / args.streams for c in burst_cpu)
            print(
                f"CPU per event task: A {a_cpu:.1f} ms, B {b_cpu:.1f} ms; of which from the "
                f"release to the final event: A {a_end:.1f} ms, B {b_end:.1f} ms"
            )

            async def one_cancel(n: int) -> tuple[float, bool]:
                key = f"c{n}"
                task_id = await start(plain_a, f"http://127.0.0.1:{page_port}/hang/{key}")
                asked = time.monotonic()
                canceled = await on_b.cancel(task_id)
                assert canceled.status.state == S.TASK_STATE_CANCELED
                deadline = time.monotonic() + 10
                while key not in pages.gone and time.monotonic() < deadline:
                    await asyncio.sleep(0.005)
                stopped = pages.gone.get(key, float("inf")) - asked
                pages.release.setdefault(key, asyncio.Event()).set()
                return stopped * 1000, True

            if args.cancels:
                stops: list[float] = []
                for first in range(0, args.cancels, 10):
                    batch = range(first, min(first + 10, args.cancels))
                    stops += [s for s, _ in await asyncio.gather(*(one_cancel(n) for n in batch))]
                await asyncio.sleep(0.5)  # any late COMPLETED would have landed by now
                rows = await conn.fetch(
                    f"SELECT state, count(*) FROM {schema}.tasks GROUP BY state"
                )
                by_state = {S.Name(r[0]): r[1] for r in rows}
                print(
                    f"cancel via B: {len(stops)} tasks; A's tool stopped after "
                    f"p50 {pct(stops, 0.5):.0f} ms, p99 {pct(stops, 0.99):.0f} ms, "
                    f"max {max(stops):.0f} ms; stored states of all tasks: {by_state}"
                )

            if args.kill:
                task_id = await start(plain_a, f"http://127.0.0.1:{page_port}/hang/kill")
                procs[0].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                async with NodeClient.connect(b_url, streaming=False) as plain_b:
                    failed = await plain_b.wait_for_state(task_id, S.TASK_STATE_FAILED, timeout=60)
                print(
                    f"kill -9 of A: task {S.Name(failed.status.state)} on B after "
                    f"{time.monotonic() - killed:.1f} s (lease 15 s, sweep every 5 s)"
                )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
        for release in pages.release.values():
            release.set()
        page_server.should_exit = True
        await serving
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--cancels", type=int, default=100)
    parser.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--at-once", type=int, default=10, help="event tasks released together")
    parser.add_argument(
        "--local-tap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also subscribe on A (the comparison stream; it is work for A as well)",
    )
    parser.add_argument(
        "--staggered",
        action="store_true",
        help="release each task as soon as its own streams are open (the bench before 2026-12-02)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
