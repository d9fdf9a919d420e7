"""``PUT /v1/agents/{id}/heartbeat`` answered ahead of the registry's Starlette stack.

A fleet of 100k agents beating every 10 s sends 10,000 heartbeats/s, so the heartbeat path is
the registry's hot path. :class:`HeartbeatRoute` is the outermost middleware of the registry app
(inside Starlette's error middleware, so an unexpected error is the same 500): it answers that
one path and passes every other request on unchanged. It applies the same gate (declared body
size, then the write token: :class:`Gate`), the same agent id check, the same
:meth:`Registry.heartbeat` and the same answers (the entry without its card, or the error body
of :func:`error_response`) as the route in :mod:`node.registry.api`, which other methods on the
path still reach (405). It skips the router, the request and response objects and the body
middlewares (a heartbeat has no body), and renders the entry's unchanging part once per row
revision (:meth:`KnownAgents.keep_head`): only its health and times are written per heartbeat.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from node.errors import RegistryError
from node.observability.metrics import RegistryMetrics
from node.registry.errors import UnreadableEntry, error_response
from node.registry.gate import Gate
from node.registry.records import RENDER_ERRORS, AgentRecord, iso, render_entry
from node.registry.service import Registry, check_agent_id
from node.registry.settings import RegistrySettings

PREFIX = "/v1/agents/"
SUFFIX = "/heartbeat"
HEADERS = b"content-type", b"application/json"
_HEALTHY = b'"healthy":'


def heartbeat_id(path: str) -> str | None:
    """The ``{id}`` of a heartbeat path (any non-empty segment, as the router matches), else
    ``None``."""
    if not (path.startswith(PREFIX) and path.endswith(SUFFIX)):
        return None
    segment = path[len(PREFIX) : -len(SUFFIX)]
    return segment if segment and "/" not in segment else None


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("not called")  # pragma: no cover


class HeartbeatAnswers:
    """The heartbeat's answer (the entry's JSON as ``render_entry`` writes it, no card), shared
    by :class:`HeartbeatRoute` and the protocol of :mod:`node.registry.heartbeat_protocol`."""

    def __init__(
        self, registry: Registry, settings: RegistrySettings, metrics: RegistryMetrics | None
    ) -> None:
        self.registry = registry
        self.gate = Gate(_no_app, settings)  # for its check only
        self.metrics = metrics
        self.ttl_s = registry.settings.ttl_s

    def hit(self, agent_id: str) -> bytes | None:
        """The answer for a remembered agent whose answer's fixed part is kept, the heartbeat
        queued (:meth:`HeartbeatBatch.hit`: no record made, nothing awaited); ``None``, with
        nothing done, for any other: :meth:`beat` answers it."""
        registry = self.registry
        found = registry.known.peek(agent_id)
        if found is None or found.head is None:
            return None
        now = registry.clock()
        entry = registry.beats.hit(agent_id, now, registry.evict_cutoff(now))
        if entry is None or entry.head is None:
            return None
        if self.metrics is not None:
            self.metrics.heartbeat()
        return self._render(entry.head, now)

    async def beat(self, agent_id: str) -> bytes:
        """Record the heartbeat through :meth:`Registry.heartbeat` (it reads the row when this
        replica does not remember the agent, or judged it evicted); its answer."""
        registry = self.registry
        record = await registry.heartbeat(agent_id)
        if self.metrics is not None:
            self.metrics.heartbeat()
        try:
            head = registry.known.head(agent_id)
            if head is None:
                head = _head(record)
                registry.known.keep_head(agent_id, head)
            return self._render(head, record.last_seen)
        except RENDER_ERRORS as exc:
            await registry.set_aside(record.id, f"cannot be rendered ({type(exc).__name__})")
            raise UnreadableEntry(f"the stored entry {record.id!r} cannot be rendered") from exc

    def _render(self, head: tuple[bytes, bytes], last_seen: float) -> bytes:
        fixed, registered = head
        ttl = self.ttl_s
        return b"".join(
            (
                fixed,
                # healthy and expiry as Registry.is_healthy and expires_at judge them
                b"true," if self.registry.clock() - last_seen <= ttl else b"false,",
                b'"registered_at":"',
                registered,
                b'","last_heartbeat":"',
                iso_bytes(last_seen),
                b'","expires_at":"',
                iso_bytes(last_seen + ttl),
                b'"}',
            )
        )


class HeartbeatRoute:
    """Answer ``PUT /v1/agents/{id}/heartbeat``; everything else goes to ``app``."""

    def __init__(self, app: ASGIApp, answers: HeartbeatAnswers) -> None:
        self.app = app
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "PUT":
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root + "/"):  # as the router matches (without it)
                path = path[len(root) :]
            agent_id = heartbeat_id(path)
            if agent_id is not None:
                await self._answer(agent_id, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _answer(self, agent_id: str, scope: Scope, receive: Receive, send: Send) -> None:
        answers = self.answers
        try:
            answers.gate.check(scope, Headers(scope=scope))
            checked = check_agent_id(agent_id)
            body = answers.hit(checked) or await answers.beat(checked)
        except RegistryError as exc:
            await error_response(exc)(scope, receive, send)
            return
        length = b"content-length", str(len(body)).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [length, HEADERS]})
        await send({"type": "http.response.body", "body": body})


_SECONDS: dict[int, bytes] = {}  # whole second -> its ISO text (a few recent ones)


def iso_bytes(t: float) -> bytes:
    """``iso(t).encode()`` at a fraction of its cost: ``datetime.fromtimestamp`` rounds to the
    microsecond half to even, as here; the date and time of the whole second are kept."""
    fraction, whole = math.modf(t)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1
    elif micro < 0:
        micro += 1_000_000
        whole -= 1
    second = int(whole)
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) >= 64:
            _SECONDS.clear()
        text = _SECONDS[second] = datetime.fromtimestamp(second, UTC).isoformat()[:19].encode()
    return text + (b".%06dZ" % micro if micro else b"Z")


def _head(record: AgentRecord) -> tuple[bytes, bytes]:
    """The entry's JSON up to its health (through ``"healthy":``), and its registration time.

    Cut from the whole entry as :func:`render_entry` writes it: ``,"healthy":`` occurs first as
    the member (a quote inside a string is escaped), so the parts join back to the same bytes.
    """
    whole = render_entry(record, healthy=True, expires_at=record.last_seen, with_card=False)
    cut = whole.index(b"," + _HEALTHY) + 1 + len(_HEALTHY)
    return whole[:cut], iso(record.registered_at).encode()
