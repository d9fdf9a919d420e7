"""One peer's A2A connection: the SDK client, retries, the deadline and the circuit breaker.

``PeerClient.call(message, deadline=...)`` sends one message and waits for the peer to finish:

1. The breaker is asked first; an open breaker fails fast (``PeerError``, nothing sent).
2. The message goes out with the official client (``ClientFactory(...).create(card)``) over the
   binding the peer's card prefers among JSONRPC, HTTP+JSON and GRPC (the card's interface
   order); an interface whose ``protocolVersion`` is 0.3 gets the SDK's 0.3 compat transport.
   HTTP bindings use the node's ONE shared ``httpx.AsyncClient``, gRPC one shared channel per
   target (:class:`~node.peers.grpc_channels.GrpcChannels`). Streamed when the peer streams,
   else a blocking send; a blocking send to a JSON-RPC 1.0 interface puts the same bytes on the
   wire through :class:`~node.peers.jsonrpc_direct.DirectJsonRpc` (fewer layers). A transient
   failure (connect error, timeout, HTTP 502/503/504, gRPC UNAVAILABLE/DEADLINE_EXCEEDED) is
   retried with bounded exponential backoff, never past the deadline; once the peer has named
   the task it is never re-sent, only polled. The send asks for no history (``historyLength``
   0): the result is in the artifacts and the status.
3. A task that is not finished when the send returns is polled with ``GetTask`` (backoff) until
   it is terminal.
4. A call that ends before its answer — past its deadline, or cancelled (``CancelledError``: the
   caller's task was canceled) — cancels the peer's task, best effort, within ``cancel_grace_s``
   (:data:`CANCEL_GRACE_S`), then raises (``PeerError``; a cancellation is re-raised as it came).
   A task the peer has named is cancelled by id (``CancelTask``); one whose blocking send is
   still in flight is found by the call's context id (:mod:`node.peers.task_lookup`: a message
   without a ``contextId`` is sent with a fresh one; a peer that refuses it, as A2A allows, gets
   the message again without one, and none from then on). That work runs in its own
   ``asyncio.Task``: a second cancellation of the caller does not cut it short, and the caller
   never waits longer than the grace for it.
5. A direct Message → its parts as the result; a completed Task → its artifacts, else its final
   status message (:mod:`node.peers.results`); failed, rejected, canceled, input-required or
   auth-required → ``PeerError`` with the peer's status text.

Only "the peer did not answer" counts against the breaker; a peer that answers with a failure
is reachable. Auth is a bearer token per peer, sent as a call-scoped header (``ClientCallContext
.service_parameters``: an HTTP header, or gRPC metadata), read from its source at each call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import grpc
import grpc.aio
import httpx
from a2a.client import A2AClientTimeoutError, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.transports.base import ClientTransport
from a2a.client.transports.grpc import GrpcTransport
from a2a.compat.v0_3.grpc_transport import CompatGrpcTransport
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from google.protobuf import json_format
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from node.call_log import note_remote_task
from node.errors import ConfigError, PeerError
from node.observability import tracing
from node.observability.tracing import SpanKind
from node.peers.breaker import CircuitBreaker
from node.peers.grpc_channels import GrpcChannels
from node.peers.jsonrpc_direct import DirectJsonRpc
from node.peers.results import message_text, parts_result, task_result
from node.peers.settings import PeersSettings
from node.peers.task_lookup import SentMessage, open_tasks
from node.protocol import INTERRUPTED, TERMINAL

_DEFAULTS = PeersSettings()  # one source for the call policy defaults

__all__ = ["PeerClient", "TokenSource", "is_transient"]

log = logging.getLogger(__name__)
T = TypeVar("T")
TokenSource = Callable[[], str | None]
RETRY_STATUS = frozenset({502, 503, 504})
RETRY_GRPC = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
CANCEL_GRACE_S = 2.0  # time allowed to cancel a remote task after the deadline or a cancel
# Every binding this node speaks; the peer's card order picks one (the SDK's server preference).
BINDINGS = (
    TransportProtocol.JSONRPC.value,
    TransportProtocol.HTTP_JSON.value,
    TransportProtocol.GRPC.value,
)
# What a failed call can raise: SDK errors, HTTP errors, gRPC errors, undecodable answers.
CALL_ERRORS = (
    A2AError,
    httpx.HTTPError,
    grpc.RpcError,
    grpc.aio.UsageError,
    ValueError,
    json_format.Error,
)


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: no connection, a timeout, HTTP 502/503/504, gRPC
    UNAVAILABLE or DEADLINE_EXCEEDED."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, A2AClientTimeoutError | httpx.TransportError):
            return True
        if isinstance(cause, httpx.HTTPStatusError):
            return cause.response.status_code in RETRY_STATUS
        if isinstance(cause, grpc.aio.AioRpcError):
            return cause.code() in RETRY_GRPC
        cause = cause.__cause__
    return False


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


def _no_token() -> str | None:
    return None


def _grpc_transport(card: AgentCard, url: str, config: ClientConfig) -> ClientTransport:
    """The gRPC transport for the card's interface at ``url``: 0.3 or 1.0 by its version.

    Registered in place of the SDK's own gRPC producer, which reads ``CompatGrpcTransport``
    from a module global that an import cycle in a2a-sdk 1.3 leaves ``None`` when
    ``a2a.server.routes`` (or a 0.3 compat module) is imported before ``a2a.client``, as a
    node does; 0.3 gRPC peers would then be sent the 1.0 service.
    """
    versions = [
        i.protocol_version
        for i in card.supported_interfaces
        if i.protocol_binding == TransportProtocol.GRPC and i.url == url
    ]
    legacy = bool(versions) and all(is_legacy_version(v) for v in versions)
    return (CompatGrpcTransport if legacy else GrpcTransport).create(card, url, config)


@dataclass(slots=True)
class _Progress:
    """What the peer told us so far about this call (kept across retries)."""

    task: Task | None = None


def _apply(task: Task | None, event: StreamResponse) -> Task:
    """Fold one stream event into the task we know."""
    if event.HasField("task"):
        return event.task
    update = event.status_update if event.HasField("status_update") else event.artifact_update
    if task is None:
        task = Task(id=update.task_id, context_id=update.context_id)
    if event.HasField("status_update"):
        task.status.CopyFrom(event.status_update.status)
        return task
    new = event.artifact_update.artifact
    for known in task.artifacts:
        if known.artifact_id == new.artifact_id:
            if event.artifact_update.append:
                known.parts.extend(new.parts)
            else:
                known.CopyFrom(new)
            return task
    task.artifacts.append(new)
    return task


class PeerClient:
    """Calls one peer; one instance (and one SDK client) per peer, shared by its skill tools.

    ``grpc_channels`` is the shared gRPC channel factory (the directory's); without one the
    client keeps its own and :meth:`aclose` closes it.
    """

    def __init__(
        self,
        peer_id: str,
        card: AgentCard,
        *,
        http: httpx.AsyncClient,
        grpc_channels: GrpcChannels | None = None,
        token: TokenSource = _no_token,
        breaker: CircuitBreaker | None = None,
        retries: int = _DEFAULTS.retries,
        streaming: bool = _DEFAULTS.streaming,
        poll_initial_s: float = 0.05,
        poll_max_s: float = 1.0,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 2.0,
        cancel_grace_s: float = CANCEL_GRACE_S,
    ) -> None:
        self.peer_id, self.card, self._token = peer_id, card, token
        self.cancel_grace_s = cancel_grace_s
        self._stopping: set[asyncio.Task[None]] = set()  # cancels outliving a cancelled call
        self._sends_context = True  # until the peer refuses a contextId of ours
        self.breaker = breaker or CircuitBreaker()
        self.retries = retries
        self._poll = (poll_initial_s, poll_max_s)
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._own_channels = grpc_channels is None
        self._channels = grpc_channels or GrpcChannels()
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            grpc_channel_factory=self._channels,
            supported_protocol_bindings=list(BINDINGS),
        )
        factory = ClientFactory(config)
        factory.register(TransportProtocol.GRPC, _grpc_transport)
        try:
            self._client = factory.create(card)
        except (ValueError, ConfigError) as exc:
            offered = ", ".join(
                f"{i.protocol_binding} {i.protocol_version or '?'}"
                for i in card.supported_interfaces
            )
            raise ConfigError(
                f"peer {peer_id}: {exc} (card offers: {offered or 'no interface'}; "
                f"this node speaks {', '.join(BINDINGS)})"
            ) from exc
        self._direct = DirectJsonRpc.of(self._client, http)  # the same bytes, fewer layers

    async def aclose(self) -> None:
        """Close the gRPC channels this client owns (shared ones belong to their owner), once
        the peer cancels still under way have ended (each within the grace)."""
        if self._stopping:
            await asyncio.wait(set(self._stopping))
        if self._own_channels:
            await self._channels.aclose()

    async def call(self, message: Message, *, deadline: float) -> Any:
        """Send ``message``, wait until the peer finishes or ``deadline`` (epoch s); its result.

        One CLIENT span ``peer <id>`` covers the call; each request carries its ``traceparent``.
        """
        attributes = {"a2a_node.peer": self.peer_id}
        with tracing.span(f"peer {self.peer_id}", kind=SpanKind.CLIENT, attributes=attributes):
            return await self._call(message, deadline)

    async def _call(self, message: Message, deadline: float) -> Any:
        try:
            token = self._token()
        except ConfigError as exc:
            raise PeerError(f"peer {self.peer_id}: {exc}") from exc
        if not self.breaker.acquire():
            retry = math.ceil(self.breaker.retry_after())
            raise PeerError(f"peer {self.peer_id} circuit open; retry after {retry}s")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        tracing.inject(headers)  # W3C trace context: an HTTP header or gRPC metadata
        progress = _Progress()
        own_context = not message.context_id and self._sends_context
        # the id the peer's task is found by before the peer names it (sent, not set on message)
        context_id = uuid.uuid4().hex if own_context else message.context_id
        sent = SentMessage(message.message_id, context_id, own_context)
        budget = max(0.0, deadline - time.time())
        try:
            async with asyncio.timeout(budget):
                answer = await self._exchange(message, deadline, headers, progress, sent)
        except TimeoutError as exc:
            self._record(answered=progress.task is not None)
            await self._stop_remote(progress, sent, headers)
            raise PeerError(f"peer {self.peer_id} did not finish within {budget:.1f}s") from exc
        except asyncio.CancelledError:  # the caller's task was canceled: so is the peer's
            stop = asyncio.create_task(self._stop_remote(progress, sent, headers))
            self._stopping.add(stop)
            stop.add_done_callback(self._stopping.discard)
            await asyncio.wait([stop])  # bounded by the grace; another cancel leaves it running
            raise
        except CALL_ERRORS as exc:
            transient = is_transient(exc)
            self._record(answered=not transient)
            what = "unreachable" if transient else "refused the call"
            raise PeerError(f"peer {self.peer_id} {what}: {exc}") from exc
        self.breaker.record_success()
        if isinstance(answer, Message):
            return parts_result(answer.parts)
        note_remote_task(answer.id)  # the task's call record (node.call_log) names it
        return await self._outcome(answer, headers)

    def _record(self, *, answered: bool) -> None:
        (self.breaker.record_success if answered else self.breaker.record_failure)()

    def _context(self, deadline: float, headers: dict[str, str] | None) -> ClientCallContext:
        # The HTTP timeout only backs up the call's own deadline (asyncio.timeout in call()).
        timeout = max(0.0, deadline - time.time()) + 1.0
        return ClientCallContext(timeout=timeout, service_parameters=headers)

    async def _retrying(self, op: Callable[[], Awaitable[T]], deadline: float) -> T:
        """``op``, retried while transient: at most ``retries`` attempts, waits growing at random
        (``wait_random_exponential``), no wait that would end past ``deadline``.

        The first attempt runs on its own (most calls need no other): the retry loop is built
        only after a transient failure, offset by that attempt, so its waits are the same.
        """
        initial, cap = self._backoff
        try:
            return await op()
        except Exception as exc:
            wait = random.uniform(0, min(initial, cap))  # tenacity's after a first attempt
            if self.retries <= 1 or not is_transient(exc) or time.time() + wait >= deadline:
                raise
        await asyncio.sleep(wait)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries - 1) | stop_before_delay(deadline - time.time()),
            wait=wait_random_exponential(multiplier=2 * initial, max=cap),  # one attempt on
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        return await retrying(op)

    async def _exchange(
        self,
        message: Message,
        deadline: float,
        headers: dict[str, str] | None,
        progress: _Progress,
        sent: SentMessage,
    ) -> Task | Message:
        # The answer's history (our own message back, the peer's progress notes) is never read:
        # asking for none saves the peer its serialisation and us the parse (issue 13).
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(history_length=0)
        )
        request.message.context_id = sent.context_id

        async def send() -> Task | Message:
            if progress.task is not None:  # the peer holds the task: poll it, never send twice
                return progress.task
            context = self._context(deadline, headers)
            if self._direct is not None and self._direct.usable:
                answer = await self._direct.send_message(request, context)
                if isinstance(answer, Task):
                    progress.task = answer
                return answer
            events = self._client.send_message(request, context=context)
            async with contextlib.aclosing(cast(AsyncGenerator[StreamResponse, None], events)):
                async for event in events:
                    if event.HasField("message"):
                        return event.message
                    progress.task = _apply(progress.task, event)
            if progress.task is None:
                raise ValueError("the answer holds neither a task nor a message")
            return progress.task

        try:
            answer = await self._retrying(send, deadline)
        except A2AError as exc:
            if not sent.own_context or progress.task is not None or is_transient(exc):
                raise
            # A2A lets a peer refuse a client's contextId (with an error): send once more without
            # ours; if that goes through, this peer's messages go without one from now on.
            request.message.context_id = sent.context_id = ""
            answer = await self._retrying(send, deadline)
            self._sends_context = False
            log.info(
                "peer %s refused a contextId (%s): sending none from now on", self.peer_id, exc
            )
        delay, cap = self._poll
        while isinstance(answer, Task) and answer.status.state not in TERMINAL | INTERRUPTED:
            await asyncio.sleep(delay)
            delay = min(delay * 2, cap)
            answer = progress.task = await self._get(answer.id, deadline, headers)
        return answer

    async def _get(self, task_id: str, deadline: float, headers: dict[str, str] | None) -> Task:
        request = GetTaskRequest(id=task_id, history_length=0)

        async def get() -> Task:
            return await self._client.get_task(request, context=self._context(deadline, headers))

        return await self._retrying(get, deadline)

    async def _outcome(self, task: Task, headers: dict[str, str] | None) -> Any:
        state = task.status.state
        status = task.status.message if task.status.HasField("message") else None
        if state == TaskState.TASK_STATE_COMPLETED:
            return task_result(task.artifacts, status)
        if state in INTERRUPTED:  # nobody will answer it: free the peer's parked task
            await self._stop_remote(_Progress(task), None, headers)
        reason = (message_text(status) if status is not None else "") or "no reason given"
        raise PeerError(f"peer {self.peer_id} task {state_name(state)}: {reason}")

    async def _stop_remote(
        self, progress: _Progress, sent: SentMessage | None, headers: dict[str, str] | None
    ) -> None:
        """Cancel the call's task on the peer: the one it named, else the one ``sent`` created
        (looked up); best effort, within ``cancel_grace_s``, never raising."""
        grace = self.cancel_grace_s
        what = progress.task.id if progress.task is not None else "of this call"
        try:
            async with asyncio.timeout(grace):
                context = ClientCallContext(timeout=grace, service_parameters=headers)
                if progress.task is not None:
                    ids = [progress.task.id]
                elif sent is not None:
                    ids = await open_tasks(self._client, sent, context)
                else:
                    ids = []
                for task_id in ids:
                    what = task_id
                    note_remote_task(task_id)  # the call record names the task it canceled
                    await self._client.cancel_task(CancelTaskRequest(id=task_id), context=context)
        except (TimeoutError, NotImplementedError, *CALL_ERRORS) as exc:
            log.info("peer %s: could not cancel task %s: %s", self.peer_id, what, exc)
