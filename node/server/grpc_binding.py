"""The gRPC binding: the a2a-sdk's gRPC servicers over the node's one request handler.

    binding = GrpcBinding(handler, host="127.0.0.1", port=0, auth=card.auth,
                          max_message_bytes=card.limits.max_body_bytes)
    await binding.start()    # binds (``binding.port`` is then the bound port), serves
    ...
    await binding.stop()

A ``grpc.aio`` server on the node's event loop serves A2A 1.0 (``lf.a2a.v1.A2AService``, the SDK's
:class:`~a2a.server.request_handlers.GrpcHandler`) and, unless turned off, A2A 0.3
(``a2a.v1.A2AService``, the SDK's ``CompatGrpcHandler``) over the same
:class:`~node.server.request_handler.NodeRequestHandler` as JSON-RPC and HTTP+JSON: the same
executor, store, idempotency and checks.

One interceptor is the gRPC edge, the counterpart of the HTTP middleware:

- authentication (when the card has credentials): ``authorization: Bearer …`` or the card's API
  key header, in the call's metadata, checked by :func:`node.server.auth.authenticate`; a call
  without valid credentials ends ``UNAUTHENTICATED`` before its request is parsed. The principal
  and capabilities reach the handler as on HTTP (the request's user and ``auth`` scopes);
- each request is parsed here, then checked by :func:`node.server.proto_guard.check_request`: one
  protobuf cannot decode (past its 100 nested messages, about 33 JSON levels: the gRPC depth
  bound) or with a non-finite number in its data ends ``INVALID_ARGUMENT`` naming the problem
  (the SDK would answer ``UNKNOWN``).

Messages larger than the card's ``limits.max_body_bytes`` end ``RESOURCE_EXHAUSTED``; concurrent
calls and idle connections are bounded (constants below).
"""

from __future__ import annotations

import contextvars
import errno
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc
from a2a.compat.v0_3.grpc_handler import CompatGrpcHandler
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import GrpcHandler
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes.common import StarletteUser
from a2a.types import AgentInterface, a2a_pb2_grpc
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError, InvalidRequestError
from google.protobuf.message import DecodeError, Message
from starlette.authentication import AuthenticationError

from node.card import AuthSettings, Credential
from node.errors import ConfigError
from node.observability import tracing
from node.server.auth import authenticate, identity
from node.server.proto_guard import check_request
from node.urls import url_host

__all__ = ["GrpcBinding", "grpc_address", "grpc_interfaces"]

log = logging.getLogger(__name__)

MAX_CONCURRENT_RPCS = 1024  # calls in progress, streams included; beyond: RESOURCE_EXHAUSTED
# No per-connection stream limit: gRPC clients do not queue past one, they fail the extra calls
# (REFUSED_STREAM, seen as UNAVAILABLE); MAX_CONCURRENT_RPCS bounds the server instead.
MAX_CONNECTION_IDLE_MS = 5 * 60 * 1000
STOP_GRACE_S = 5.0  # how long calls in progress may finish when the node stops
V1_SERVICE = "lf.a2a.v1.A2AService"
V0_3_SERVICE = "a2a.v1.A2AService"

_CALLER: contextvars.ContextVar[Credential | None] = contextvars.ContextVar(
    "a2a_node_grpc_caller", default=None
)
_Abort = Callable[[A2AError, grpc.aio.ServicerContext], Awaitable[None]]


def grpc_address(public_url: str, port: int) -> str:
    """The ``host:port`` a gRPC client dials: the public URL's host and the gRPC port."""
    host = urlsplit(public_url).hostname or "127.0.0.1"
    return f"{url_host(host)}:{port}"


def grpc_interfaces(address: str, *, v0_3: bool = True) -> list[AgentInterface]:
    """The card entries of a gRPC binding at ``address``: A2A 1.0, and 0.3 unless ``v0_3``."""
    versions = (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3) if v0_3 else (PROTOCOL_VERSION_1_0,)
    return [
        AgentInterface(url=address, protocol_binding="GRPC", protocol_version=v) for v in versions
    ]


class _CallContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's context, with the caller the edge authenticated (as on HTTP)."""

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        call = super().build(context)
        caller = _CALLER.get()
        if caller is not None:
            scopes, user = identity(caller)
            call.user = StarletteUser(user)
            call.state["auth"] = scopes
        return call


def _metadata(details: grpc.HandlerCallDetails, key: str) -> str:
    for name, value in details.invocation_metadata or ():
        if name == key:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return ""


class _Edge(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Authenticate each call, then check its parsed request (see the module docstring)."""

    def __init__(self, auth: AuthSettings, aborts: dict[str, _Abort]) -> None:
        self._auth = auth
        self._aborts = aborts

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        tracing.attach_incoming(handler_call_details.invocation_metadata or ())  # traceparent
        if self._auth.enabled:
            try:
                caller = authenticate(
                    self._auth,
                    _metadata(handler_call_details, "authorization"),
                    _metadata(handler_call_details, self._auth.api_key_header.lower()),
                )
            except AuthenticationError as exc:
                return _refusal(handler, f"unauthorized: {exc}")
            _CALLER.set(caller)  # the handler runs in this context (grpc.aio documents it)
        service = handler_call_details.method.lstrip("/").split("/", 1)[0]
        return _checked(handler, self._aborts[service])


def _refusal(handler: grpc.RpcMethodHandler, reason: str) -> grpc.RpcMethodHandler:
    """A handler that ends the call ``UNAUTHENTICATED`` without parsing its request."""

    async def refuse(_request: bytes, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)

    async def refuse_stream(
        _request: bytes, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)
        yield  # pragma: no cover - abort raises

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse_stream)
    return grpc.unary_unary_rpc_method_handler(refuse)


def _checked(handler: grpc.RpcMethodHandler, abort: _Abort) -> grpc.RpcMethodHandler:
    """``handler`` parsing its own requests: a bad one is ``INVALID_ARGUMENT``, not ``UNKNOWN``.

    A request protobuf cannot decode (too deep for its limit of 100 nested messages, about 33
    JSON levels, or malformed) and one :func:`check_request` refuses end before the handler.
    """
    deserialize = handler.request_deserializer
    serializer = {"response_serializer": handler.response_serializer}

    async def parsed(raw: bytes, context: grpc.aio.ServicerContext) -> Message:
        try:
            request: Message = deserialize(raw)
        except DecodeError as exc:
            await abort(InvalidRequestError(f"request cannot be decoded: {exc}"), context)
            raise  # abort raises; this is never reached
        try:
            check_request(request)
        except A2AError as error:
            await abort(error, context)
        return request

    if handler.unary_stream is not None:
        stream = handler.unary_stream

        async def checked_stream(
            raw: bytes, context: grpc.aio.ServicerContext
        ) -> AsyncIterator[Any]:
            async for item in stream(await parsed(raw, context), context):
                yield item

        return grpc.unary_stream_rpc_method_handler(checked_stream, **serializer)
    unary = handler.unary_unary
    if unary is None:  # the A2A services have no client-streaming methods
        return handler

    async def checked(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        return await unary(await parsed(raw, context), context)

    return grpc.unary_unary_rpc_method_handler(checked, **serializer)


def _taken(host: str, port: int) -> bool:
    """Whether a listening socket already holds ``host:port`` (any of its addresses)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return False  # gRPC reports the name itself
    for family, kind, proto, _, where in found:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
            try:
                probe.bind(where)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


class GrpcBinding:
    """A node's gRPC server: started and stopped by the node's lifespan."""

    def __init__(
        self,
        handler: RequestHandler,
        *,
        host: str,
        port: int,
        auth: AuthSettings,
        max_message_bytes: int,
        v0_3: bool = True,
    ) -> None:
        self.host = host
        self.port = port  # the bound port once started (a configured 0 picks one)
        self._configured_port = port
        self._handler = handler
        self._auth = auth
        self._max_message_bytes = max_message_bytes
        self._v0_3 = v0_3
        self._server: Any = None  # grpc.aio.Server, made on the serving loop by start()

    @property
    def started(self) -> bool:
        return self._server is not None

    def _make_server(self) -> Any:
        builder = _CallContextBuilder()
        v1 = GrpcHandler(self._handler, builder)
        compat = CompatGrpcHandler(self._handler, builder) if self._v0_3 else None
        aborts: dict[str, _Abort] = {V1_SERVICE: v1.abort_context}
        if compat is not None:
            aborts[V0_3_SERVICE] = compat.abort_context
        server = grpc.aio.server(
            interceptors=[_Edge(self._auth, aborts)],
            options=[
                ("grpc.so_reuseport", 0),  # a port in use is an error, never shared
                ("grpc.max_receive_message_length", self._max_message_bytes),
                ("grpc.max_connection_idle_ms", MAX_CONNECTION_IDLE_MS),
            ],
            maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(v1, server)  # type: ignore[no-untyped-call]
        if compat is not None:
            a2a_v0_3_pb2_grpc.add_A2AServiceServicer_to_server(  # type: ignore[no-untyped-call]
                compat, server
            )
        return server

    async def start(self) -> int:
        """Bind and serve; returns the bound port. ``ConfigError`` when the port is taken."""
        address = f"{url_host(self.host)}:{self._configured_port}"
        in_use = ConfigError(f"cannot serve gRPC on {address}: the port is in use")
        if self._configured_port and _taken(self.host, self._configured_port):
            raise in_use  # said here, before gRPC's core logs its own line about it
        server = self._make_server()
        try:
            port: int = server.add_insecure_port(address)
        except RuntimeError as exc:
            await server.stop(None)
            raise in_use from exc
        await server.start()
        self._server, self.port = server, port
        log.info("gRPC binding on %s", address)
        return port

    async def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Refuse new calls; calls in progress get ``grace`` seconds, then are cancelled."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
