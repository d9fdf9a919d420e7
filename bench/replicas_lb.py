"""1,000 concurrent tasks through HAProxy to two replicas on one PostgreSQL (issue 10 §6).

Run (needs ``A2A_NODE_TEST_PG_URL`` and ``haproxy``; makes and drops a schema of its own):

    source /tmp/pgenv; .venv/bin/python bench/replicas_lb.py [--tasks 1000]

The setup is the one of ``tests/server/test_replicas_haproxy.py`` (its HAProxy config, round
robin with health checks, and ``Replica`` processes advertising the balancer's URL), imported
from there. One client process sends ``--tasks`` blocking SendMessage calls (``calculate``) at
once through the balancer, then reads every answered task back on *each* replica directly
(GetTask, and ListTasks paged to the end). Reported: wall time of the sends, failed calls,
5xx answers HAProxy counted, the split of the SendMessage requests between the replicas
(HAProxy's per-server request counts over the send phase), and lost tasks (answered but
missing, or not COMPLETED, on a replica).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from a2a.types import ListTasksRequest, TaskState  # noqa: E402

from node.client import NodeClient  # noqa: E402
from tests.server.test_replicas import Replica  # noqa: E402
from tests.server.test_replicas_haproxy import Balanced, balanced_replicas  # noqa: E402

S = TaskState


class To(httpx.AsyncBaseTransport):
    """Sends every request to one replica's port, whatever URL the card advertises."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def stats(balancer: Balanced) -> dict[str, dict[str, str]]:
    """HAProxy's stats rows by ``proxy/server``."""
    async with httpx.AsyncClient() as client:
        text = (await client.get(f"{balancer.stats}/stats;csv")).text.lstrip("# ")
    return {f"{r['pxname']}/{r['svname']}": r for r in csv.DictReader(io.StringIO(text))}


@asynccontextmanager
async def balanced(tmp: Path) -> AsyncIterator[tuple[Balanced, Replica, Replica]]:
    haproxy = shutil.which("haproxy")
    assert haproxy, "needs haproxy"
    async with balanced_replicas(tmp, os.environ["A2A_NODE_TEST_PG_URL"], haproxy) as replicas:
        yield replicas


async def listed(client: NodeClient) -> set[str]:
    ids: set[str] = set()
    token = ""
    while True:
        page = await client.client.list_tasks(ListTasksRequest(page_size=100, page_token=token))
        ids |= {t.id for t in page.tasks}
        token = page.next_page_token
        if not token:
            return ids


async def run(args: argparse.Namespace) -> None:
    async with balanced(Path(tempfile.mkdtemp())) as (balancer, a, b):
        async with NodeClient.connect(balancer.url, streaming=False, timeout=120) as client:
            before = await stats(balancer)

            async def one(i: int) -> str | None:
                try:
                    task = await client.call("calculate", {"expression": f"{i} + 1"})
                except Exception as exc:  # counted: the figure says how many
                    print(f"  call {i}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    return None
                return task.id if task.status.state == S.TASK_STATE_COMPLETED else None

            started = time.monotonic()
            ids = await asyncio.gather(*(one(i) for i in range(args.tasks)))
            wall = time.monotonic() - started
            after = await stats(balancer)
        answered = [i for i in ids if i]
        split = {
            s: int(after[f"replicas/{s}"]["hrsp_2xx"] or 0)
            - int(before[f"replicas/{s}"]["hrsp_2xx"] or 0)
            for s in ("a", "b")
        }
        five = int(after["node/FRONTEND"]["hrsp_5xx"] or 0)
        lost: dict[str, int] = {}
        sem = asyncio.Semaphore(50)
        for name, replica in (("a", a), ("b", b)):
            http = httpx.AsyncClient(transport=To(replica.port), timeout=60)
            async with NodeClient.connect(balancer.url, streaming=False, http=http) as direct:
                on_list = await listed(direct)

                async def state(task_id: str, direct: NodeClient = direct) -> int:
                    async with sem:
                        try:
                            return (await direct.get(task_id)).status.state
                        except Exception:
                            return 0

                states = await asyncio.gather(*(state(t) for t in answered))
            await http.aclose()
            missing = sum(1 for t in answered if t not in on_list)
            not_done = sum(1 for s in states if s != S.TASK_STATE_COMPLETED)
            lost[name] = max(missing, not_done)
            print(f"replica {name}: ListTasks misses {missing}, GetTask not COMPLETED {not_done}")
        print(
            f"{args.tasks} tasks through HAProxy: wall {wall:.1f} s; answered COMPLETED "
            f"{len(answered)}; failed calls {args.tasks - len(answered)}; HAProxy 5xx {five}; "
            f"SendMessage split a {split['a']} / b {split['b']}; lost (worst replica) "
            f"{max(lost.values())}; load average {os.getloadavg()[0]:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
