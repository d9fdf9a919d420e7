"""``a2a-node top REGISTRY``: the registry's agents with their health and load.

Each round lists the registry's agents (healthy or not) and scrapes every agent's ``/metrics``
(Prometheus text, parsed by ``prometheus_client``) at most ``--concurrency`` at a time, each
within ``--scrape-timeout`` seconds and 1 MiB: tasks in flight
(``a2a_node_tasks_in_flight``), completed and failed tasks (``a2a_node_tasks_total{state}``),
tool calls (``a2a_node_tool_calls_total``) and their rate between two scrapes. An agent whose
metrics cannot be read (down, refused, not a node, no ``/metrics``) shows ``—``.

``--once`` scrapes twice, ``--interval`` seconds apart (the rate needs two samples; with
``--interval 0`` one scrape and no rate), prints one table (or ``--json``) and exits; otherwise
the table is redrawn every ``--interval`` seconds until Ctrl-C, live on a terminal, as a new
plain table each round anywhere else.

The nodes' credentials (``--token``/``--api-key``, as for ``send``) are sent to every agent the
registry lists; the registry's read token is ``--registry-token``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from node.cli.common import EXIT_OK, CliError, add_client_options, token_of
from node.cli.output import format_table, print_json
from node.client import split_card_url

__all__ = ["AgentLoad", "Sample", "add_top_command", "read_sample", "scrape_agents"]

REGISTRY_TOKEN_ENV = "A2A_NODE_REGISTRY_TOKEN"
#: The most of one agent's /metrics that is read; a bigger answer counts as unreadable.
MAX_METRICS_BYTES = 1 << 20
DASH = "—"
HEADERS = ("ID", "URL", "HEALTH", "IN FLIGHT", "COMPLETED", "FAILED", "TOOL CALLS", "CALLS/S")


@dataclass(frozen=True, slots=True)
class Sample:
    """One scrape of one node's metrics."""

    in_flight: float
    completed: float
    failed: float
    tool_calls: float
    at: float  # time.monotonic() of the scrape


@dataclass(frozen=True, slots=True)
class AgentLoad:
    """A row of the table: the registry's entry, and the agent's load when it could be read."""

    id: str
    name: str
    url: str
    healthy: bool
    sample: Sample | None
    rate: float | None  # tool calls per second between the last two samples
    error: str | None  # why the metrics could not be read

    def json(self) -> dict[str, Any]:
        metrics = None
        if self.sample is not None:
            metrics = {
                "in_flight": self.sample.in_flight,
                "completed": self.sample.completed,
                "failed": self.sample.failed,
                "tool_calls": self.sample.tool_calls,
                "tool_calls_per_s": self.rate,
            }
        return {
            "id": self.id,
            "name": self.name,
            "url": self.url,
            "healthy": self.healthy,
            "metrics": metrics,
            "metrics_error": self.error,
        }

    def row(self) -> list[str]:
        s = self.sample
        load = (
            [_count(s.in_flight), _count(s.completed), _count(s.failed), _count(s.tool_calls)]
            if s is not None
            else [DASH] * 4
        )
        rate = f"{self.rate:.1f}" if self.rate is not None else DASH
        return [self.id, self.url, "healthy" if self.healthy else "unhealthy", *load, rate]


def _count(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def read_sample(text: str, at: float) -> Sample:
    """The load figures in a node's ``/metrics`` text; ``ValueError`` when it is not that format.

    Missing series count as 0 (a node that has run no task yet exports no ``tasks_total``).
    """
    from prometheus_client.parser import text_string_to_metric_families

    in_flight = completed = failed = tool_calls = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            value = sample.value
            if not math.isfinite(value):
                continue
            if sample.name == "a2a_node_tasks_in_flight":
                in_flight += value
            elif sample.name == "a2a_node_tasks_total":
                state = sample.labels.get("state")
                completed += value if state == "completed" else 0.0
                failed += value if state == "failed" else 0.0
            elif sample.name == "a2a_node_tool_calls_total":
                tool_calls += value
    return Sample(in_flight, completed, failed, tool_calls, at)


async def _scrape(http: httpx.AsyncClient, url: str, timeout_s: float) -> Sample:
    async with asyncio.timeout(timeout_s), http.stream("GET", url) as response:
        response.raise_for_status()
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_METRICS_BYTES:
                raise ValueError(f"more than {MAX_METRICS_BYTES} bytes")
    return read_sample(body.decode("utf-8", errors="replace"), time.monotonic())


def _base_url(entry: Mapping[str, Any]) -> str:
    return split_card_url(str(entry.get("card_url", "")))[0]


async def scrape_agents(
    http: httpx.AsyncClient,
    agents: Sequence[Mapping[str, Any]],
    previous: Mapping[str, Sample],
    *,
    concurrency: int,
    timeout_s: float,
) -> list[AgentLoad]:
    """Every agent's load, scraped at most ``concurrency`` at a time; the rate against
    ``previous`` (by agent id). An unreadable agent has ``sample=None`` and the reason."""
    gate = asyncio.Semaphore(concurrency)

    async def one(entry: Mapping[str, Any]) -> AgentLoad:
        agent_id, base = str(entry.get("id", "")), _base_url(entry)
        sample: Sample | None = None
        error: str | None = None
        if not base.startswith(("http://", "https://")):
            error = f"not an http(s) URL: {base[:100]}"
        else:
            async with gate:
                try:
                    sample = await _scrape(http, f"{base}/metrics", timeout_s)
                except TimeoutError:
                    error = f"no answer within {timeout_s:g}s"
                except (httpx.HTTPError, ValueError) as exc:
                    error = f"{type(exc).__name__}: {str(exc)[:200]}"
        before = previous.get(agent_id)
        rate = None
        if sample is not None and before is not None and sample.at > before.at:
            rate = max(0.0, sample.tool_calls - before.tool_calls) / (sample.at - before.at)
        return AgentLoad(
            id=agent_id,
            name=str(entry.get("name", "")),
            url=base,
            healthy=bool(entry.get("healthy")),
            sample=sample,
            rate=rate,
            error=error,
        )

    return list(await asyncio.gather(*(one(a) for a in agents)))


def _samples(loads: Iterable[AgentLoad]) -> dict[str, Sample]:
    return {a.id: a.sample for a in loads if a.sample is not None}


class _Top:
    """The rounds of ``top``: list the agents, scrape them, remember the samples."""

    def __init__(self, args: argparse.Namespace, http: httpx.AsyncClient) -> None:
        self.args = args
        self.http = http
        self.samples: dict[str, Sample] = {}
        self.agents: list[dict[str, Any]] = []

    async def list_agents(self) -> None:
        from node.peers.registry_client import search_agents

        registry_token = self.args.registry_token or os.environ.get(REGISTRY_TOKEN_ENV) or None
        self.agents = await search_agents(
            self.http,
            self.args.registry_url,
            token=registry_token,
            healthy_only=False,
            include_card=False,
            timeout_s=10.0,
        )

    async def round(self) -> list[AgentLoad]:
        loads = await scrape_agents(
            self.http,
            self.agents,
            self.samples,
            concurrency=self.args.concurrency,
            timeout_s=self.args.scrape_timeout,
        )
        self.samples = _samples(loads)
        return loads


def _table(loads: Sequence[AgentLoad], title: str) -> Any:
    from rich.table import Table

    table = Table(*HEADERS, title=title, title_justify="left", box=None, header_style="bold")
    for load in loads:
        table.add_row(*load.row())
    return table


async def _top(args: argparse.Namespace) -> int:
    if args.interval < 0 or not math.isfinite(args.interval):
        raise CliError("--interval must be 0 or more seconds")
    if args.interval == 0 and not (args.once or args.json):
        raise CliError("--interval 0 redraws without pause; give seconds, or --once")
    if args.concurrency < 1:
        raise CliError("--concurrency must be at least 1")
    headers = {}
    if token := token_of(args):
        headers["Authorization"] = f"Bearer {token}"
    if args.api_key:
        headers["X-API-Key"] = args.api_key
    # No redirects: a node's /metrics is on the node; the credentials go nowhere else.
    async with httpx.AsyncClient(headers=headers, follow_redirects=False) as http:
        top = _Top(args, http)
        await top.list_agents()
        if args.once or args.json:
            loads = await top.round()
            if args.interval > 0:
                await asyncio.sleep(args.interval)  # the second sample, for the rate
                loads = await top.round()
            if args.json:
                print_json([load.json() for load in loads])
            else:
                print(format_table(HEADERS, [load.row() for load in loads]))
            return EXIT_OK
        await _refresh(top, args.interval)
    return EXIT_OK


async def _refresh(top: _Top, interval: float) -> None:
    """Redraw every ``interval`` seconds until Ctrl-C (the agent list re-read each round)."""
    from rich.console import Console
    from rich.live import Live

    from node.errors import RegistryError

    console = Console()
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    with live or contextlib.nullcontext():
        while True:
            try:
                await top.list_agents()
            except RegistryError as exc:  # keep the last list; say so once per round
                print(f"a2a-node: {exc}", file=sys.stderr)
            loads = await top.round()
            title = f"{time.strftime('%H:%M:%S')}  {len(loads)} agents  {top.args.registry_url}"
            if live is not None:
                live.update(_table(loads, title), refresh=True)
            else:
                print(title)
                print(format_table(HEADERS, [load.row() for load in loads]), flush=True)
                print()
            await asyncio.sleep(interval)


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def add_top_command(sub: Any) -> None:
    """Register ``top``."""
    p = sub.add_parser(
        "top",
        help="a registry's agents with their health and load, from each agent's /metrics",
        description="List the registry's agents with health (from the registry) and load (from "
        "each agent's /metrics): tasks in flight, completed and failed tasks, tool calls and "
        "their rate. An agent whose metrics cannot be read shows '—'. Redraws every --interval "
        "seconds until Ctrl-C; --once prints one table and exits. Exit codes: 0 listed (whatever "
        "the agents answered), 1 the registry could not be read, 2 bad arguments.",
    )
    p.add_argument("registry_url", help="the registry's base URL")
    p.add_argument(
        "--once",
        action="store_true",
        help="print one table and exit (two scrapes --interval apart, for the rate)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=2.0,
        help="seconds between scrapes (default: 2; with --once, 0 means one scrape, no rate)",
    )
    p.add_argument(
        "--scrape-timeout",
        type=_positive,
        default=2.0,
        help="seconds for one agent's /metrics (default: 2)",
    )
    p.add_argument(
        "--concurrency", type=int, default=16, help="agents scraped at once (default: 16)"
    )
    p.add_argument(
        "--registry-token", help=f"the registry's read token (default: ${REGISTRY_TOKEN_ENV})"
    )
    p.add_argument("--json", action="store_true", help="print one JSON list and exit (as --once)")
    add_client_options(p)
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_top(args))
    except KeyboardInterrupt:  # how a refreshing top is meant to end
        return EXIT_OK
