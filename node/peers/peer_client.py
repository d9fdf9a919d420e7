"""One peer's A2A connection: the SDK client, retries, the deadline and the circuit breaker.

``PeerClient.call(message, deadline=...)`` sends one message and waits for the peer to finish:

1. The breaker is asked first; an open breaker fails fast (``PeerError``, nothing sent).
2. The message goes out with the official client (``ClientFactory(...).create(card)`` on the
   node's ONE shared ``httpx.AsyncClient``): streamed when the peer streams, else a blocking
   send. A transient failure (connect error, timeout, HTTP 502/503/504) is retried with bounded
   exponential backoff, never past the deadline; once the peer has named the task it is never
   re-sent, only polled.
3. A task that is not finished when the send returns is polled with ``GetTask`` (backoff) until
   it is terminal; at the deadline it is cancelled, best effort.
4. Completed → the artifacts as a result (:mod:`node.peers.results`); failed, rejected,
   canceled, input-required or auth-required → ``PeerError`` with the peer's status text.

Only "the peer did not answer" counts against the breaker; a peer that answers with a failure
is reachable. Auth is a bearer token per peer, sent as a call-scoped header (``ClientCallContext
.service_parameters``), read from its source at each call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httpx
from a2a.client import A2AClientTimeoutError, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf import json_format
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from node.errors import ConfigError, PeerError
from node.peers.breaker import CircuitBreaker
from node.peers.results import message_text, parts_result, task_result
from node.peers.settings import PeersSettings
from node.protocol import INTERRUPTED, TERMINAL

_DEFAULTS = PeersSettings()  # one source for the call policy defaults

__all__ = ["PeerClient", "TokenSource", "is_transient"]

log = logging.getLogger(__name__)
T = TypeVar("T")
TokenSource = Callable[[], str | None]
RETRY_STATUS = frozenset({502, 503, 504})
CANCEL_GRACE_S = 2.0  # time allowed to cancel a remote task after the deadline
BINDINGS = ["JSONRPC", "HTTP+JSON"]


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: no connection, a timeout, HTTP 502/503/504."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, A2AClientTimeoutError | httpx.TransportError):
            return True
        if isinstance(cause, httpx.HTTPStatusError):
            return cause.response.status_code in RETRY_STATUS
        cause = cause.__cause__
    return False


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input-required``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


def _no_token() -> str | None:
    return None


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
    """Calls one peer; one instance (and one SDK client) per peer, shared by its skill tools."""

    def __init__(
        self,
        peer_id: str,
        card: AgentCard,
        *,
        http: httpx.AsyncClient,
        token: TokenSource = _no_token,
        breaker: CircuitBreaker | None = None,
        retries: int = _DEFAULTS.retries,
        streaming: bool = _DEFAULTS.streaming,
        poll_initial_s: float = 0.05,
        poll_max_s: float = 1.0,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 2.0,
    ) -> None:
        self.peer_id, self.card, self._token = peer_id, card, token
        self.breaker = breaker or CircuitBreaker()
        self.retries = retries
        self._poll = (poll_initial_s, poll_max_s)
        self._backoff = (backoff_initial_s, backoff_max_s)
        config = ClientConfig(
            streaming=streaming, httpx_client=http, supported_protocol_bindings=BINDINGS
        )
        try:
            self._client = ClientFactory(config).create(card)
        except ValueError as exc:
            raise ConfigError(
                f"peer {peer_id}: {exc} (card offers no JSONRPC or HTTP+JSON interface)"
            ) from exc

    async def call(self, message: Message, *, deadline: float) -> Any:
        """Send ``message``, wait until the peer finishes or ``deadline`` (epoch s); its result."""
        try:
            token = self._token()
        except ConfigError as exc:
            raise PeerError(f"peer {self.peer_id}: {exc}") from exc
        if not self.breaker.acquire():
            retry = math.ceil(self.breaker.retry_after())
            raise PeerError(f"peer {self.peer_id} circuit open; retry after {retry}s")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        progress = _Progress()
        budget = max(0.0, deadline - time.time())
        try:
            async with asyncio.timeout(budget):
                answer = await self._exchange(message, deadline, headers, progress)
        except TimeoutError as exc:
            self._record(answered=progress.task is not None)
            if progress.task is not None:
                await self._cancel_quietly(progress.task.id, headers)
            raise PeerError(f"peer {self.peer_id} did not finish within {budget:.1f}s") from exc
        except (A2AError, httpx.HTTPError, ValueError, json_format.Error) as exc:
            transient = is_transient(exc)
            self._record(answered=not transient)
            what = "unreachable" if transient else "refused the call"
            raise PeerError(f"peer {self.peer_id} {what}: {exc}") from exc
        self.breaker.record_success()
        if isinstance(answer, Message):
            return parts_result(answer.parts)
        return await self._outcome(answer, headers)

    def _record(self, *, answered: bool) -> None:
        (self.breaker.record_success if answered else self.breaker.record_failure)()

    def _context(self, deadline: float, headers: dict[str, str] | None) -> ClientCallContext:
        # The HTTP timeout only backs up the call's own deadline (asyncio.timeout in call()).
        timeout = max(0.0, deadline - time.time()) + 1.0
        return ClientCallContext(timeout=timeout, service_parameters=headers)

    async def _retrying(self, op: Callable[[], Awaitable[T]], deadline: float) -> T:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.retries) | stop_before_delay(deadline - time.time()),
            wait=wait_random_exponential(multiplier=self._backoff[0], max=self._backoff[1]),
            retry=retry_if_exception(is_transient),
            reraise=True,
        )
        return await retrying(op)

    async def _exchange(
        self, message: Message, deadline: float, headers: dict[str, str] | None, progress: _Progress
    ) -> Task | Message:
        request = SendMessageRequest(message=message)

        async def send() -> Task | Message:
            if progress.task is not None:  # the peer holds the task: poll it, never send twice
                return progress.task
            events = self._client.send_message(request, context=self._context(deadline, headers))
            async with contextlib.aclosing(cast(AsyncGenerator[StreamResponse, None], events)):
                async for event in events:
                    if event.HasField("message"):
                        return event.message
                    progress.task = _apply(progress.task, event)
            if progress.task is None:
                raise ValueError("the answer holds neither a task nor a message")
            return progress.task

        answer = await self._retrying(send, deadline)
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
            await self._cancel_quietly(task.id, headers)
        reason = (message_text(status) if status is not None else "") or "no reason given"
        raise PeerError(f"peer {self.peer_id} task {state_name(state)}: {reason}")

    async def _cancel_quietly(self, task_id: str, headers: dict[str, str] | None) -> None:
        try:
            async with asyncio.timeout(CANCEL_GRACE_S):
                context = ClientCallContext(timeout=CANCEL_GRACE_S, service_parameters=headers)
                await self._client.cancel_task(CancelTaskRequest(id=task_id), context=context)
        except (TimeoutError, A2AError, httpx.HTTPError, ValueError, json_format.Error) as exc:
            log.info("peer %s: could not cancel task %s: %s", self.peer_id, task_id, exc)
