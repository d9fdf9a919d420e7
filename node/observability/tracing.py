"""Traces across hops: W3C trace context in and out, OpenTelemetry spans, OTLP export.

Turned on by the standard OpenTelemetry environment, read once by :func:`configure` (which
``a2a-node serve`` calls before it builds the app, so the a2a-sdk's own spans stay):
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (OTLP/HTTP protobuf,
e.g. ``http://127.0.0.1:4318``), ``OTEL_EXPORTER_OTLP_HEADERS`` for a collector's credentials,
``OTEL_SERVICE_NAME`` (default: the card's id), ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``;
``OTEL_SDK_DISABLED=true`` keeps it off. A program embedding the node may instead set its own
tracer provider before :func:`~node.server.app.build_node_app`.

Spans (when a provider is set): one SERVER span per HTTP request (:class:`TraceContextMiddleware`,
health probes excepted), the a2a-sdk's handler spans, ``task`` per task (the executor), ``tool
<name>`` per tool call (the runner), ``peer <id>`` per peer call (CLIENT; the peer client), and
the ``mcp`` SDK's spans per MCP request.

Trace context travels even with tracing off: an incoming ``traceparent`` (HTTP header, gRPC
metadata, MCP ``_meta``) becomes the current context, so log records carry its trace id and
every outgoing call (:func:`inject`: peer calls on every binding, push deliveries; the ``mcp``
SDK injects into ``_meta`` itself) continues it. With no provider the spans are a shared no-op
context manager: no span objects, no SDK wrappers (``node.server.sdk_tuning``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

__all__ = [
    "SpanKind",
    "TraceContextMiddleware",
    "attach_incoming",
    "configure",
    "current_trace_id",
    "enabled",
    "inject",
    "span",
]

TRACER_NAME = "a2a-node"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
#: Paths that get no span: probes every few seconds would drown the traces.
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

_NOOP: contextlib.nullcontext[None] = contextlib.nullcontext()
_tracer = trace.get_tracer(TRACER_NAME)  # a proxy: it follows the provider set later
_on = False  # a real tracer provider is set: latched by refresh() (configure, the middleware)


def endpoint_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for OTLP export (and does not disable the SDK)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARS)


def configure(service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Set the process's tracer provider exporting by OTLP/HTTP, when the environment asks.

    Call it before building the app. Returns whether spans are recorded (also True when a
    provider was already set, which is kept). Spans are batched and flushed at exit.
    """
    if refresh():
        return True
    if not endpoint_configured(environ):
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = environ.get("OTEL_SERVICE_NAME") or service_name
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return refresh()


def refresh() -> bool:
    """Look again whether a real tracer provider is set; :func:`enabled` answers from this.

    :func:`configure` and each app's :class:`TraceContextMiddleware` (built with the app's
    middleware stack) call it, so a provider set before a node serves is seen. Asking
    OpenTelemetry each time would cost an ``os.environ`` miss (a caught ``KeyError``) per span.
    """
    global _on
    provider = trace.get_tracer_provider()
    _on = not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    return _on


def enabled() -> bool:
    """Whether spans go anywhere: a real tracer provider was set (as of the last refresh)."""
    return _on


def span(
    name: str, *, kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (current while it runs); a shared no-op when tracing is off.

    An exception leaving the block is recorded on the span, whose status becomes ERROR.
    """
    if not _on:
        return _NOOP
    return _tracer.start_as_current_span(name, kind=kind, attributes=dict(attributes or {}))


def set_error(description: str) -> None:
    """Mark the current span failed (a task or call that failed without raising)."""
    current = trace.get_current_span()
    if current.is_recording():
        current.set_status(Status(StatusCode.ERROR, description[:500]))


def current_trace_id() -> str | None:
    """The trace id of the current span or incoming context (32 hex digits), or None."""
    context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(context.trace_id) if context.is_valid else None


def current_span_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return trace.format_span_id(context.span_id) if context.is_valid else None


def inject(carrier: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Add ``traceparent`` (and ``tracestate``) for the current context to ``carrier``.

    Nothing is added when there is no valid context. Returns ``carrier``.
    """
    propagate.inject(carrier)
    return carrier


def attach_incoming(pairs: Iterable[tuple[str, str | bytes]]) -> None:
    """Continue the trace of incoming metadata (gRPC): its context becomes the current one.

    For a context that lives as long as the call (grpc.aio runs the handler in the
    interceptor's context); nothing happens without a ``traceparent``.
    """
    carrier = {
        name: value if isinstance(value, str) else value.decode("latin-1")
        for name, value in pairs
        if name in ("traceparent", "tracestate")
    }
    if "traceparent" in carrier:
        otel_context.attach(propagate.extract(carrier))


_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[Mapping[str, Any]]]
_Send = Callable[[Mapping[str, Any]], Awaitable[None]]


class TraceContextMiddleware:
    """ASGI: continue an incoming ``traceparent``; with tracing on, one SERVER span per request.

    With tracing off a request without ``traceparent`` costs one scan of its header list.
    """

    def __init__(self, app: Callable[[_Scope, _Receive, _Send], Awaitable[None]]) -> None:
        self.app = app
        refresh()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED_PATHS:
            await self.app(scope, receive, send)
            return
        if not _on:
            for name, _ in scope["headers"]:
                if name == b"traceparent":
                    break
            else:  # the common case: nothing to continue, nothing to record
                await self.app(scope, receive, send)
                return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in (b"traceparent", b"tracestate")
        }
        if not _on:
            token = otel_context.attach(propagate.extract(carrier))
            try:
                await self.app(scope, receive, send)
            finally:
                otel_context.detach(token)
            return
        parent = propagate.extract(carrier) if carrier else None
        method = scope.get("method", "GET")
        attributes = {"http.request.method": method, "url.path": scope["path"]}
        with _tracer.start_as_current_span(
            f"{method} {_route(scope['path'])}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attributes,
        ) as server_span:

            async def send_status(message: Mapping[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    server_span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        server_span.set_status(Status(StatusCode.ERROR))
                await send(message)

            await self.app(scope, receive, send_status)


def _route(path: str) -> str:
    """A bounded span name for ``path``: ids in REST paths are not part of it."""
    if path == "/":
        return "/ (JSON-RPC)"
    first = path.split("/", 2)[1]
    return f"/{first}"
