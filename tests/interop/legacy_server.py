"""A plain a2a-sdk 0.3 server (no a2a-node extension), run by the 0.3 virtual environment's python.

    python legacy_server.py [--host 127.0.0.1] [--port 0] [--reply message|task]
                            [--preferred JSONRPC|HTTP+JSON] [--bearer TOKEN] [--no-streaming]

It serves JSON-RPC at ``/`` and HTTP+JSON at ``/rest`` (``/rest/v1/message:send`` ...), both
listed on its 0.3 card (``url``/``preferredTransport`` follow ``--preferred``), with two skills and
no input schemas:

- ``echo`` (the default) answers ``echo: <text>``;
- ``shout`` (picked by ``message.metadata.skill`` or ``skill_id``) answers the text upper-cased.

Any data parts received are reported back as one data part ``{"received": [<data>, ...]}``.
``--reply message`` answers with a Message; ``--reply task`` with a completed Task whose artifact
holds the parts. ``--bearer`` requires ``Authorization: Bearer TOKEN`` (the card declares it).
Port 0 picks a free port; once serving it prints one line ``READY <base url>`` and flushes.
This file imports only a2a-sdk 0.3 and its dependencies, never a2a-node.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import socket
import sys
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.apps.rest.rest_adapter import RESTAdapter
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    DataPart,
    HTTPAuthSecurityScheme,
    Part,
    SecurityScheme,
    TextPart,
)
from a2a.utils import new_agent_parts_message, new_task
from a2a.utils.parts import get_data_parts, get_text_parts
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

REST_PREFIX = "/rest"
SKILLS = ("echo", "shout")


def answer(skill: str, text: str, data: list[dict[str, Any]]) -> list[Part]:
    """The reply parts for one request."""
    reply = text.upper() if skill == "shout" else f"echo: {text}"
    parts = [Part(root=TextPart(text=reply))]
    if data:
        parts.append(Part(root=DataPart(data={"received": data})))
    return parts


class EchoExecutor(AgentExecutor):
    """Answers each message with :func:`answer`, as a Message or as a completed Task."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        metadata = message.metadata or {}
        skill = str(metadata.get("skill") or metadata.get("skill_id") or "echo")
        parts = answer(
            skill, "\n".join(get_text_parts(message.parts)), get_data_parts(message.parts)
        )
        if self.reply == "message":
            await event_queue.enqueue_event(
                new_agent_parts_message(parts, context.context_id, context.task_id)
            )
            return
        task = context.current_task or new_task(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await updater.add_artifact(parts, name=skill)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_card(base: str, preferred: str, streaming: bool, bearer: bool) -> AgentCard:
    urls = {"JSONRPC": f"{base}/", "HTTP+JSON": f"{base}{REST_PREFIX}"}
    card = AgentCard(
        name="legacy echo",
        description="A plain a2a-sdk 0.3 agent that echoes or shouts the text it gets.",
        url=urls[preferred],
        preferred_transport=preferred,
        additional_interfaces=[AgentInterface(url=u, transport=t) for t, u in urls.items()],
        version="0.3.0",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="echo",
                name="echo",
                description="Answers 'echo: <text>'; reports any data part it got.",
                tags=["echo", "text"],
                examples=["hello there"],
            ),
            AgentSkill(
                id="shout",
                name="shout",
                description="Answers the text upper-cased; reports any data part it got.",
                tags=["shout", "upper case", "text"],
                examples=["make this loud"],
            ),
        ],
    )
    if bearer:
        card.security_schemes = {
            "bearer": SecurityScheme(root=HTTPAuthSecurityScheme(scheme="bearer"))
        }
        card.security = [{"bearer": []}]
    return card


class RequireBearer:
    """Refuses every request but the card's without ``Authorization: Bearer <token>`` (401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/.well-known/"):
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != self.expected:
                response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_app(card: AgentCard, reply: str) -> Starlette:
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(reply), task_store=InMemoryTaskStore()
    )
    jsonrpc = A2AStarletteApplication(agent_card=card, http_handler=handler)
    rest = RESTAdapter(agent_card=card, http_handler=handler)
    routes = jsonrpc.routes(rpc_url="/")
    for (path, method), endpoint in rest.routes().items():
        routes.append(Route(f"{REST_PREFIX}{path}", _endpoint(endpoint), methods=[method]))
    return Starlette(routes=routes)


def _endpoint(endpoint: Any) -> Any:
    @functools.wraps(endpoint)
    async def call(request: Request) -> Any:
        return await endpoint(request)

    return call


async def serve(args: argparse.Namespace) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    base = f"http://{args.host}:{sock.getsockname()[1]}"
    card = build_card(base, args.preferred, not args.no_streaming, bool(args.bearer))
    app: ASGIApp = build_app(card, args.reply)
    if args.bearer:
        app = RequireBearer(app, args.bearer)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving  # raises what stopped it
            return
        await asyncio.sleep(0.02)
    print(f"READY {base}", flush=True)
    await serving


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reply", choices=["message", "task"], default="task")
    parser.add_argument("--preferred", choices=["JSONRPC", "HTTP+JSON"], default="JSONRPC")
    parser.add_argument("--bearer", default="", help="require this bearer token")
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
