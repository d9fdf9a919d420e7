"""Prometheus metrics of a node and of the registry, served at ``GET /metrics``.

Each app owns one :class:`~prometheus_client.CollectorRegistry` (never the process-wide default),
so several nodes in one process count apart. Call sites use one-line hooks:

- the executor: :func:`task_run` around a task's run, :func:`note_skill` when its skill is
  known (:func:`requested_skill`), :class:`MeteredUpdater` (remembers the state the task reached);
- the runner: :meth:`NodeMetrics.tool_call` per call (:func:`refused_call` for a call refused
  before it ran); the peer tool: :func:`peer_call` around a peer call;
- read at scrape time (nothing on the hot path): circuit breakers per peer (the peer directory),
  push deliveries (the push dispatcher's counters), registry agents by health.

Names (shared with ``a2a-node top``)::

    a2a_node_tasks_total{skill,state}            completed|failed|canceled|rejected|input_required
    a2a_node_task_duration_seconds{skill}        histogram, start of the run → final state
    a2a_node_tasks_in_flight                     gauge
    a2a_node_tool_calls_total{tool,outcome}      ok|error|timeout|invalid_arguments|denied
    a2a_node_tool_call_duration_seconds{tool}    histogram
    a2a_node_peer_calls_total{peer,outcome}      ok|error|timeout
    a2a_node_peer_call_duration_seconds{peer}    histogram
    a2a_node_peer_circuit_state{peer}            0 closed, 1 half-open, 2 open
    a2a_node_push_deliveries_total{outcome}      delivered|retried|failed|refused
    a2a_registry_agents{health}                  healthy|unhealthy, computed at scrape time
    a2a_registry_heartbeats_total
    a2a_registry_registrations_total{outcome}    created|updated|refused

Label values are bounded: a skill, tool or peer label is the name only when the node knows it
(its skills, its catalog, its peer directory) and fewer than :data:`MAX_LABEL_VALUES` names were
seen; anything else is ``"other"``. No task ids, no free text.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Mapping
from time import perf_counter
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from a2a.types import TaskState
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from node.call_log import CallsUpdater
from node.errors import ErrorKind, PeerError, ToolError

if TYPE_CHECKING:
    from a2a.server.tasks import TaskUpdater

    from node.planning import Request as PlannedRequest

__all__ = [
    "METRICS_PATH",
    "OTHER",
    "MeteredUpdater",
    "NodeMetrics",
    "RegistryMetrics",
    "metrics_route",
    "note_skill",
    "peer_call",
    "refused_call",
    "requested_skill",
    "task_run",
]

METRICS_PATH = "/metrics"
OTHER = "other"
MAX_LABEL_VALUES = 200  # distinct names per label; beyond that new names count as "other"
TIME_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

#: The states a task run ends (or waits) in, as label values.
FINAL_STATES: Mapping[int, str] = {
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input_required",
}
#: A failed tool call's error kind → its outcome label (anything else: ``"error"``).
TOOL_OUTCOMES: Mapping[str, str] = {
    ErrorKind.TIMEOUT: "timeout",
    ErrorKind.INVALID_ARGUMENTS: "invalid_arguments",
    ErrorKind.BAD_ARGUMENTS: "invalid_arguments",
    ErrorKind.CAPABILITY_MISSING: "denied",
    ErrorKind.GUARD: "denied",
}
_CIRCUIT = {"closed": 0, "half_open": 1, "open": 2}


class _Bounded:
    """A label's values: names ``known`` accepts, at most ``cap`` of them; else ``"other"``."""

    def __init__(self, known: Callable[[str], bool], cap: int = MAX_LABEL_VALUES) -> None:
        self.known, self._cap, self._seen = known, cap, set[str]()

    def __call__(self, value: object) -> str:
        if not isinstance(value, str):
            return OTHER
        if value in self._seen:
            return value
        if len(self._seen) >= self._cap or not self.known(value):
            return OTHER
        self._seen.add(value)
        return value


def _nothing(_: str) -> bool:
    return False


class MeteredUpdater(CallsUpdater):
    """The executor's ``TaskUpdater``: call records (:mod:`node.call_log`), plus the skill and the
    last state of the task, which :func:`task_run` reads when the run ends."""

    skill: str | None = None
    state: int = TaskState.TASK_STATE_UNSPECIFIED
    refused: tuple[str, str] | None = None  # (tool, error kind) of a call refused in planning

    async def update_status(self, state: TaskState, *args: Any, **kwargs: Any) -> None:
        await super().update_status(state, *args, **kwargs)
        self.state = state


def requested_skill(request: PlannedRequest) -> object:
    """The skill a request names: its first data part's ``skill``, else its metadata's."""
    for item in request.data:
        if isinstance(item, dict) and "skill" in item:
            return item["skill"]
    return request.named_skill


def note_skill(updater: TaskUpdater, *names: object) -> None:
    """The task's skill is ``names[0]`` when all of ``names`` are the same string."""
    first = names[0] if names else None
    if isinstance(updater, MeteredUpdater) and isinstance(first, str) and len(set(names)) == 1:
        updater.skill = first


class _TaskRun:
    """One run of a task (a context manager): in flight while it lasts, counted when it ends."""

    __slots__ = ("_metrics", "_start", "_updater")

    def __init__(self, metrics: NodeMetrics, updater: TaskUpdater) -> None:
        self._metrics, self._updater = metrics, updater
        self._start = 0.0

    def __enter__(self) -> None:
        self._metrics.in_flight += 1
        self._start = perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        metrics, updater = self._metrics, self._updater
        metrics.in_flight -= 1
        refused = getattr(updater, "refused", None)
        if refused is not None:
            metrics.tool_call(refused[0], refused[1], 0.0)
        state = FINAL_STATES.get(getattr(updater, "state", 0))
        if state is None and isinstance(exc, asyncio.CancelledError):
            state = "canceled"  # the SDK cancels the run after the executor's cancel()
        if state is not None:
            skill = metrics._skill(getattr(updater, "skill", None))
            metrics._count(metrics._tasks, (skill, state))
            metrics._observe(metrics._task_seconds, skill, perf_counter() - self._start)


class _NoRun:
    """The task context manager when metrics are off."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


_NO_RUN = _NoRun()


class _PeerCall:
    """One peer call (a context manager): its outcome and latency."""

    __slots__ = ("_metrics", "_peer", "_start")

    def __init__(self, metrics: NodeMetrics, peer: str) -> None:
        self._metrics, self._peer, self._start = metrics, peer, 0.0

    def __enter__(self) -> None:
        self._start = perf_counter()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            outcome = "ok"
        elif isinstance(exc, PeerError) and isinstance(exc.__cause__, TimeoutError):
            outcome = "timeout"
        elif isinstance(exc, asyncio.CancelledError):
            return  # the task was cancelled: not the peer's doing
        else:
            outcome = "error"
        metrics = self._metrics
        peer = metrics._peer(self._peer)
        metrics._count(metrics._peer_calls, (peer, outcome))
        metrics._observe(metrics._peer_seconds, peer, perf_counter() - self._start)


class PushCounts(Protocol):
    """What the push dispatcher counts (:class:`~node.server.push_dispatcher.PushStats`)."""

    delivered: int
    retried: int
    refused: int
    failed: int
    dropped: int


class _ScrapeTime(Collector):
    """Metric families computed when scraped, from callables set while the app starts."""

    def __init__(self) -> None:
        self.circuits: Callable[[], Mapping[str, str]] | None = None
        self.push: PushCounts | None = None
        self.health: Callable[[], Mapping[str, int]] | None = None
        self.in_flight: Callable[[], int] | None = None

    def collect(self) -> Iterable[Metric]:
        if self.in_flight is not None:
            yield GaugeMetricFamily(
                "a2a_node_tasks_in_flight", "Tasks running now.", value=self.in_flight()
            )
        if self.circuits is not None:
            gauge = GaugeMetricFamily(
                "a2a_node_peer_circuit_state",
                "Circuit breaker per peer: 0 closed, 1 half-open, 2 open.",
                labels=["peer"],
            )
            for peer, state in sorted(self.circuits().items())[:MAX_LABEL_VALUES]:
                gauge.add_metric([peer], _CIRCUIT.get(state, 0))
            yield gauge
        if self.push is not None:
            s = self.push
            counter = CounterMetricFamily(
                "a2a_node_push_deliveries",
                "Push notification deliveries (events x webhooks) by outcome.",
                labels=["outcome"],
            )
            counter.add_metric(["delivered"], s.delivered)
            counter.add_metric(["retried"], s.retried)
            counter.add_metric(["refused"], s.refused)
            counter.add_metric(["failed"], s.failed - s.refused + s.dropped)
            yield counter
        if self.health is not None:
            counts = self.health()
            gauge = GaugeMetricFamily(
                "a2a_registry_agents", "Registered agents by health.", labels=["health"]
            )
            for health in ("healthy", "unhealthy"):
                gauge.add_metric([health], counts.get(health, 0))
            yield gauge


class _Counter:
    """A counter family as plain numbers by label values, turned into a ``CounterMetricFamily``
    when scraped. The app's event loop is its only writer (and the scrape runs on it), so no lock:
    prometheus-client's ``Counter`` and ``Histogram`` children (a lock and checks per call) cost
    ~12 µs per task where these cost ~2 (``bench/metrics_cost.py``)."""

    def __init__(self, name: str, doc: str, labels: tuple[str, ...], *known: tuple[str, ...]):
        self.name, self.doc, self.labels = name, doc, labels
        self.values = dict.fromkeys(known, 0.0)  # series shown at 0 before they happen

    def inc(self, key: tuple[str, ...]) -> None:
        self.values[key] = self.values.get(key, 0.0) + 1

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self.name, self.doc, labels=self.labels)
        for key, value in self.values.items():
            family.add_metric(key, value)
        yield family


class _Histogram:
    """A histogram family with one label, as plain numbers (see :class:`_Counter`): per label
    value, the count in each bucket (not cumulative; the last one is above every bound) and the
    sum of the observations."""

    def __init__(self, name: str, doc: str, label: str, bounds: tuple[float, ...] = TIME_BUCKETS):
        self.name, self.doc, self.label, self.bounds = name, doc, label, bounds
        self._les = [str(floatToGoString(b)) for b in bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        self.rows: dict[str, list[float]] = {}

    def observe(self, label: str, value: float) -> None:
        row = self.rows.get(label)
        if row is None:
            row = self.rows[label] = [0.0] * (len(self.bounds) + 2)
        row[bisect_left(self.bounds, value)] += 1  # the first bound >= value ("le")
        row[-1] += value

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self.name, self.doc, labels=[self.label])
        for label, row in self.rows.items():
            total, buckets = 0.0, []
            for le, count in zip(self._les, row[:-1], strict=True):
                total += count
                buckets.append((le, total))
            family.add_metric([label], buckets, row[-1])
        yield family


class _Metrics:
    """An app's registry and its exposition."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._scraped = _ScrapeTime()
        self.registry.register(self._scraped)
        self.refresh: Callable[[], Awaitable[None]] | None = None  # awaited before each scrape

    def _add(self, family: _Counter | _Histogram) -> Any:
        self.registry.register(family)
        return family

    @staticmethod
    def _count(counter: _Counter, labels: tuple[str, ...]) -> None:
        counter.inc(labels)

    @staticmethod
    def _observe(histogram: _Histogram, label: str, seconds: float) -> None:
        histogram.observe(label, seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus text format."""
        return generate_latest(self.registry)


class NodeMetrics(_Metrics):
    """A node's metrics; ``is_skill`` and ``is_tool`` say which names may be label values."""

    def __init__(self, *, is_skill: Callable[[str], bool], is_tool: Callable[[str], bool]) -> None:
        super().__init__()
        self._tasks: _Counter = self._add(
            _Counter("a2a_node_tasks", "Tasks reaching a final state.", ("skill", "state"))
        )
        self._task_seconds: _Histogram = self._add(
            _Histogram("a2a_node_task_duration_seconds", "Task run, start to final state.", "skill")
        )
        self.in_flight = 0  # a plain int (one event loop writes it), read when scraped
        self._scraped.in_flight = lambda: self.in_flight
        self._tool_calls: _Counter = self._add(
            _Counter("a2a_node_tool_calls", "Tool calls by outcome.", ("tool", "outcome"))
        )
        self._tool_seconds: _Histogram = self._add(
            _Histogram("a2a_node_tool_call_duration_seconds", "Tool call latency.", "tool")
        )
        self._peer_calls: _Counter = self._add(
            _Counter("a2a_node_peer_calls", "Calls to peers by outcome.", ("peer", "outcome"))
        )
        self._peer_seconds: _Histogram = self._add(
            _Histogram("a2a_node_peer_call_duration_seconds", "Peer call latency.", "peer")
        )
        self._skill, self._tool, self._peer = (
            _Bounded(is_skill),
            _Bounded(is_tool),
            _Bounded(_nothing),
        )

    # -- hot path -------------------------------------------------------------------------------

    def tool_call(self, tool: str, error_kind: str | None, seconds: float) -> None:
        """A call of ``tool`` ended: ``error_kind`` None when it succeeded."""
        outcome = "ok" if error_kind is None else TOOL_OUTCOMES.get(error_kind, "error")
        name = self._tool(tool)
        self._count(self._tool_calls, (name, outcome))
        self._observe(self._tool_seconds, name, seconds)

    # -- read at scrape time ----------------------------------------------------------------------

    def watch_peers(self, circuits: Callable[[], Mapping[str, str]]) -> None:
        """Peers known to the node (by id) and their breaker states, from the peer directory."""
        self._scraped.circuits = circuits
        self._peer.known = lambda peer: peer in circuits()

    def watch_push(self, counts: PushCounts) -> None:
        """The push dispatcher's delivery counters."""
        self._scraped.push = counts


def task_run(metrics: NodeMetrics | None, updater: TaskUpdater) -> _TaskRun | _NoRun:
    """``with task_run(metrics, updater):`` around a task's run (the updater knows how it
    ended); a no-op when metrics are off."""
    return _NO_RUN if metrics is None else _TaskRun(metrics, updater)


def refused_call(updater: TaskUpdater, tool: str, exc: ToolError) -> None:
    """A call of ``tool`` was refused before it ran (not found, arguments); counted when the
    task's run ends (not when the lean path only tried it: the SDK path then plans it again)."""
    if isinstance(updater, MeteredUpdater):
        updater.refused = (tool, exc.kind)


def peer_call(metrics: NodeMetrics | None, peer: str) -> _PeerCall | _NoRun:
    """``with peer_call(metrics, peer_id):`` around one call to a peer; a no-op without metrics."""
    return _NO_RUN if metrics is None else _PeerCall(metrics, peer)


class RegistryMetrics(_Metrics):
    """The registry's metrics; ``health`` counts agents as ``{"healthy": n, "unhealthy": m}``,
    after ``refresh`` (awaited at each scrape) has counted them in the store."""

    REGISTRATIONS = ("created", "updated", "refused")

    def __init__(
        self,
        health: Callable[[], Mapping[str, int]],
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__()
        self._scraped.health, self.refresh = health, refresh
        self._heartbeats: _Counter = self._add(
            _Counter("a2a_registry_heartbeats", "Heartbeats accepted.", (), ())
        )
        self._registrations: _Counter = self._add(  # every outcome shows, at 0 until it happens
            _Counter(
                "a2a_registry_registrations", "Registrations by outcome.", ("outcome",),
                *((outcome,) for outcome in self.REGISTRATIONS),
            )
        )  # fmt: skip

    def heartbeat(self) -> None:
        self._heartbeats.inc(())

    def registration(self, outcome: str) -> None:
        """``created``, ``updated`` (the same id again) or ``refused``."""
        if outcome in self.REGISTRATIONS:
            self._count(self._registrations, (outcome,))


def metrics_route(metrics: _Metrics) -> Route:
    """``GET /metrics``: the app's metrics in Prometheus text format."""

    async def endpoint(_: Request) -> Response:
        if metrics.refresh is not None:
            await metrics.refresh()
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_PLAIN_0_0_4)

    return Route(METRICS_PATH, endpoint, methods=["GET"])
