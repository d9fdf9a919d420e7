"""What tracing and the log fields cost a request when tracing is off (no tracer provider).

Run: ``.venv/bin/python bench/tracing_overhead.py [--n 200000]``

Times, in this process and without a tracer provider (the default), each hook a request meets:
the ASGI ``TraceContextMiddleware`` (a request with eight headers, without and with a
``traceparent``) against the bare app, the executor's ``tracing.span("task")`` and the runner's
``tracing.span("tool …")`` (a shared no-op), ``logs.bind`` (the task's log fields), the per-task
``log.info`` line at the default level (warning: not written), and ``tracing.inject`` on a peer
call. The sum is what one one-call task pays; compare it with the node's CPU time per request in
``bench/node_throughput.py`` (server CPU ms/req).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.observability import logs, tracing

HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"wrk"),
    (b"accept", b"*/*"),
    (b"content-type", b"application/json"),
    (b"content-length", b"187"),
    (b"a2a-version", b"1.0"),
    (b"authorization", b"Bearer x"),
    (b"connection", b"keep-alive"),
]
TRACEPARENT = (b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")


def per_call(fn: Callable[[], Any], n: int) -> float:
    """Microseconds per call of ``fn`` (best of three runs of ``n``)."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


async def asgi_per_call(app: Any, headers: list[tuple[bytes, bytes]], n: int) -> float:
    scope = {"type": "http", "path": "/", "method": "POST", "headers": headers}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(_: Any) -> None:
        return None

    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            await app(scope, receive, send)
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


async def bare(scope: Any, receive: Any, send: Any) -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    n = parser.parse_args().n
    assert not tracing.enabled(), "run without a tracer provider (tracing off)"
    middleware = tracing.TraceContextMiddleware(bare)
    base = asyncio.run(asgi_per_call(bare, HEADERS, n))
    plain = asyncio.run(asgi_per_call(middleware, HEADERS, n)) - base
    traced = asyncio.run(asgi_per_call(middleware, [*HEADERS, TRACEPARENT], n)) - base
    log = logging.getLogger("bench.executor")
    log.setLevel(logging.WARNING)
    attributes = {"a2a.task.id": "t", "a2a.context.id": "c"}

    def task_span() -> None:
        with tracing.span("task", attributes=attributes):
            pass

    def tool_span() -> None:
        with tracing.span("tool calculate", attributes={"a2a_node.tool": "calculate"}):
            pass

    def bind() -> None:
        contextvars.copy_context().run(logs.bind, task_id="t", context_id="c", principal="p")

    empty = per_call(lambda: contextvars.copy_context().run(lambda: None), n)
    rows = [
        ("middleware, no traceparent", plain),
        ("middleware, with traceparent (attach/detach)", traced),
        ('tracing.span("task") (no-op)', per_call(task_span, n)),
        ('tracing.span("tool …") (no-op)', per_call(tool_span, n)),
        ("logs.bind (task, context, principal)", per_call(bind, n) - empty),
        ("log.info at level warning", per_call(lambda: log.info("task %s", "t"), n)),
        ("tracing.inject (peer call, no context)", per_call(lambda: tracing.inject({}), n)),
    ]
    width = max(len(name) for name, _ in rows)
    for name, us in rows:
        print(f"{name:<{width}}  {us:6.2f} µs")
    one_call = plain + sum(us for name, us in rows[2:6])
    print(f"{'a one-call task without traceparent':<{width}}  {one_call:6.2f} µs")


if __name__ == "__main__":
    main()
