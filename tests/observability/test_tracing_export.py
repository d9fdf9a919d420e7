"""One request followed through coordinator → web → text, real processes exporting real OTLP.

The coordinator, web and text nodes (``cards/``, static peers, JSON logs) run as their own
processes with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a scripted collector on loopback: a
Starlette app that decodes each ``POST /v1/traces`` body as the protobuf
``ExportTraceServiceRequest`` (opentelemetry-proto) the real exporter sends. A ``page_report``
request with a ``traceparent`` goes to the coordinator; its trace id must be in every node's spans
(each hop's server span the child of the caller's ``peer`` span) and in every node's log lines,
and in the call records of the task.
"""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.network.netsupport import Processes, card, free_ports, wait_for
from tests.servers import free_socket, running

pytestmark = pytest.mark.network

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"
PAGE = """<html><head><title>Tracing</title></head><body><p>Distributed tracing follows one
request across services. Each service records spans. Spans share one trace id. The collector
receives the spans by OTLP. Operators read the trace to see where the time went.</p>
</body></html>"""


@dataclass(frozen=True)
class Span:
    service: str
    scope: str
    name: str
    trace_id: str
    span_id: str
    parent: str
    kind: int


@dataclass
class Collector:
    """An OTLP/HTTP traces endpoint that keeps every span it is sent."""

    spans: list[Span]

    def app(self) -> Starlette:
        async def traces(request: Request) -> Response:
            body = await request.body()
            if request.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            assert request.headers["content-type"] == "application/x-protobuf"
            export = ExportTraceServiceRequest.FromString(body)
            for resource in export.resource_spans:
                attributes = {a.key: a.value.string_value for a in resource.resource.attributes}
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            Span(
                                attributes.get("service.name", "?"),
                                scope.scope.name,
                                span.name,
                                span.trace_id.hex(),
                                span.span_id.hex(),
                                span.parent_span_id.hex(),
                                span.kind,
                            )
                        )
            reply = ExportTraceServiceResponse().SerializeToString()
            return Response(reply, media_type="application/x-protobuf")

        return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])

    def traced(self) -> list[Span]:
        return [s for s in self.spans if s.trace_id == TRACE_ID]


@pytest.fixture
async def collector() -> AsyncIterator[tuple[Collector, str]]:
    spans = Collector([])
    async with running(spans.app(), free_socket(), lifespan="off") as url:
        yield spans, url


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async def page(_: Request) -> HTMLResponse:
        return HTMLResponse(PAGE)

    app = Starlette(routes=[Route("/", page)])
    async with running(app, free_socket(), lifespan="off") as url:
        yield url


def send_body(arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": "page_report", "arguments": arguments}}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def is_entry(span: Span) -> bool:
    """A node's span for an incoming HTTP request (the SDK marks its handler spans SERVER too)."""
    return span.scope == "a2a-node" and span.kind == 2  # SPAN_KIND_SERVER


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON log lines of a node (its banner line is printed as text)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


async def test_one_trace_id_in_every_nodes_spans_and_logs(
    tmp_path: Path, collector: tuple[Collector, str], site: str
) -> None:
    spans, collector_url = collector
    procs = Processes(tmp_path)
    procs.env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector_url,
        OTEL_BSP_SCHEDULE_DELAY="100",  # ms: spans arrive soon after they end
    )
    procs.env.pop("OTEL_SERVICE_NAME", None)
    coordinator_port, web_port, text_port = free_ports(3)
    urls = {
        "web": f"http://127.0.0.1:{web_port}",
        "text": f"http://127.0.0.1:{text_port}",
        "coordinator": f"http://127.0.0.1:{coordinator_port}",
    }
    cards = {
        "web": card("web", network={"allow_cidrs": ["127.0.0.0/8"]}),
        "text": card("text"),
        "coordinator": card(
            "coordinator", peers={"static": [{"url": urls["web"]}, {"url": urls["text"]}]}
        ),
    }
    try:
        children = {}
        for name, data in cards.items():
            port = int(urls[name].rsplit(":", 1)[1])
            children[name] = await procs.node(data, port, "--log-format", "json")
        for name, child in children.items():
            await procs.ready(child, urls[name] + "/readyz", timeout=90.0)  # a loaded machine
        report = {"url": site + "/", "top": 3}
        async with httpx.AsyncClient(timeout=30.0) as http:
            coordinator = urls["coordinator"]

            async def peers_found() -> bool:  # untraced sends until both static peers are read
                reply = await http.post(
                    coordinator + "/", json=send_body(report), headers={"A2A-Version": "1.0"}
                )
                return reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

            await wait_for(peers_found, timeout=20.0, what="the coordinator to read its peers")
            headers = {"A2A-Version": "1.0", "traceparent": TRACEPARENT}
            reply = await http.post(coordinator + "/", json=send_body(report), headers=headers)
        task = reply.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]

        async def every_node_exported() -> bool:
            return {s.service for s in spans.traced()} >= set(cards)

        await wait_for(every_node_exported, timeout=20.0, what="spans from every node")
    finally:
        await procs.close()  # each node flushes its spans at exit

    traced = spans.traced()
    by_service = {name: [s for s in traced if s.service == name] for name in cards}
    coordinator_spans = {s.name for s in by_service["coordinator"]}
    assert {"task", "tool web__http_fetch", "tool text__keywords", "peer web", "peer text"} <= (
        coordinator_spans
    )
    # the coordinator's server span continues the caller's; each peer's continues a peer span
    server = [s for s in by_service["coordinator"] if is_entry(s)]
    assert [s.parent for s in server] == [PARENT_SPAN]
    for peer in ("web", "text"):
        calls = {s.span_id for s in by_service["coordinator"] if s.name == f"peer {peer}"}
        entries = [s for s in by_service[peer] if is_entry(s)]
        assert entries and all(s.parent in calls for s in entries), (peer, entries)
        assert "task" in {s.name for s in by_service[peer]}
    # the SDK's own spans stayed: tracing was set up before the apps were built
    assert "a2a-python-sdk" in {s.scope for s in traced}

    for name in cards:
        lines = json_lines(children[name].log_path)
        mine = [line for line in lines if line.get("trace_id") == TRACE_ID]
        assert mine, f"{name}: no log line with the trace id"
        assert any(line.get("task_id") and line.get("principal") for line in mine), name
    calls = task["metadata"]["a2a_node_calls"]
    assert calls and {c["trace_id"] for c in calls} == {TRACE_ID}
