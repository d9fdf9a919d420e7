"""The node's public skills as an MCP server: each ``tools/call`` is an A2A task of this node.

:func:`skill_server` builds a low-level ``mcp`` :class:`~mcp.server.lowlevel.Server` whose tools
are the node's public skills (local, pipeline and peer skills; the same names and input schemas
as on the agent card). A call sends ``{"skill": name, "arguments": ...}`` through the node's own
request handler, so it is a real task with the caller's principal and capabilities, the node's
limits and hop rules, stored like any other. While it runs, each status update of the task is
an MCP progress notification; when the MCP request is cancelled (the client gave up, timed out
or disconnected), the task is cancelled too.

The caller is read from the HTTP request the MCP transport hands over (the node's
authentication middleware has run on it); over stdio there is none, and the card's anonymous
capabilities apply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.requests import Request

from node.client import artifacts_of, skill_message, status_text
from node.protocol import TERMINAL
from node.tooling.results import non_finite_path, to_text
from node.tooling.tool import Tool

__all__ = ["skill_server"]

log = logging.getLogger(__name__)
_CONTEXTS = DefaultServerCallContextBuilder()
_MAX_ERROR = 2000


def _call_context(request: object) -> ServerCallContext:
    """The A2A call context of the MCP request's caller (anonymous without an HTTP request)."""
    if isinstance(request, Request):
        return _CONTEXTS.build(request)
    return ServerCallContext(user=UnauthenticatedUser())


def _text(*parts: str) -> list[types.ContentBlock]:
    return [types.TextContent(text=p) for p in parts if p]


def tool_result(task: Task) -> types.CallToolResult:
    """A finished task as a ``CallToolResult``: its artifacts, or its reason as an error."""
    state = task.status.state
    found = artifacts_of(task)
    if state != TaskState.TASK_STATE_COMPLETED:
        errors = [to_text(v) for name, vs in found.items() if name.endswith(".error") for v in vs]
        reason = status_text(task) or TaskState.Name(state)
        return types.CallToolResult(
            content=_text("; ".join([reason, *errors])[:_MAX_ERROR]), is_error=True
        )
    values = [v for vs in found.values() for v in vs]
    content = _text(*(to_text(v) for v in values))
    structured: Any = None
    if len(values) == 1 and isinstance(values[0], dict):
        structured = values[0]
    elif values and not all(isinstance(v, str) for v in values):
        structured = {"result": values[0] if len(values) == 1 else values}
    return types.CallToolResult(content=content, structured_content=structured)


def skill_server(
    handler: RequestHandler,
    skills: Callable[[], Mapping[str, Tool]],
    *,
    name: str,
    version: str,
    description: str | None = None,
) -> Server[Any]:
    """An MCP server over ``skills`` (read on every request: peers' skills come and go)."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=str(t.description),
                    input_schema=dict(t.parameters),
                    annotations=types.ToolAnnotations(read_only_hint=t.read_only),
                )
                for t in skills().values()
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in skills():
            return types.CallToolResult(
                content=_text(f"unknown tool {params.name!r}"), is_error=True
            )
        bad = non_finite_path(params.arguments or {})
        if bad is not None:  # JSON has no NaN/Infinity: a stored task holding one is unreadable
            return types.CallToolResult(
                content=_text(f"arguments{bad.replace('/', '.')} must be a finite number"),
                is_error=True,
            )
        context = _call_context(ctx.request)
        request = SendMessageRequest(
            message=skill_message(params.name, params.arguments or {}),
            configuration=SendMessageConfiguration(),
        )
        task_id: str | None = None
        final: Task | None = None
        steps = 0
        try:
            async for event in handler.on_message_send_stream(request, context):
                if isinstance(event, Task):
                    task_id = event.id
                    if event.status.state in TERMINAL:
                        final = event
                elif isinstance(event, TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
                    task_id = event.task_id
                if isinstance(event, TaskStatusUpdateEvent):
                    message = status_text_of(event)
                    if event.status.state == TaskState.TASK_STATE_WORKING:
                        steps += 1
                        text = message or f"running {params.name}"
                        await ctx.session.report_progress(steps, None, text)
            # the SDK's stream ends quietly when cancelled: the next await raises it here
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class():
            if task_id is not None:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    await _cancel(handler, task_id, context)
            raise
        if task_id is None:  # pragma: no cover - the executor always creates a task
            return types.CallToolResult(content=_text("no task was created"), is_error=True)
        task = final or await handler.on_get_task(GetTaskRequest(id=task_id), context)
        if task is None:  # pragma: no cover
            return types.CallToolResult(content=_text("the task was lost"), is_error=True)
        return tool_result(task)

    def input_schema(tool_name: str) -> Mapping[str, Any] | None:
        """For the SDK's ``Mcp-Param-*`` header check (else it lists every tool per call)."""
        found = skills().get(tool_name)
        return None if found is None else found.parameters

    return Server(
        name,
        version=version,
        description=description,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def status_text_of(event: TaskStatusUpdateEvent) -> str:
    return "\n".join(p.text for p in event.status.message.parts if p.HasField("text"))


async def _cancel(handler: RequestHandler, task_id: str, context: ServerCallContext) -> None:
    try:
        await handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
    except Exception as exc:  # the task may have ended meanwhile
        log.debug("cancelling task %s after its MCP request was cancelled: %s", task_id, exc)
