"""One push-notification delivery: POST one event to one webhook, through the node's URL guard.

The body is the event as a ``StreamResponse`` (proto3 JSON), as the SDK's own sender posts it. The
config's authentication goes in the headers: ``X-A2A-Notification-Token: <token>`` and
``Authorization: <scheme> <credentials>``. The URL passes the node's
:class:`~node.tooling.guards.urls.UrlGuard` at every delivery (DNS may have changed since the
config was created), which also connects to the very address it checked; redirects are not
followed. Each delivery is bounded by ``timeout``
(DNS, connect, send and response together).

Logs name the task, the config id and the webhook's origin, never its path, query or credentials.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

import httpx
from a2a.types import TaskPushNotificationConfig

from node.errors import GuardError, ToolError
from node.observability import tracing
from node.tooling.guards.urls import UrlGuard

log = logging.getLogger(__name__)
TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_REPLY_BYTES = 64 * 1024
_RETRY_STATUS = frozenset({408, 425, 429})


class Outcome(enum.Enum):
    DELIVERED = "delivered"
    RETRY = "retry"  # the receiver may accept it later: down, timed out, 5xx, 408/425/429
    GIVE_UP = "give_up"  # it never will: refused by the guard, 4xx, a redirect


def webhook_headers(config: TaskPushNotificationConfig) -> dict[str, str]:
    """The authentication headers ``config`` asks for."""
    headers: dict[str, str] = {}
    if config.token:
        headers[TOKEN_HEADER] = config.token
    auth = config.authentication
    if config.HasField("authentication") and auth.scheme and auth.credentials:
        headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
    return headers


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` for logs (no user info, path or query)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<invalid URL>"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


async def deliver(
    client: httpx.AsyncClient,
    guard: UrlGuard,
    config: TaskPushNotificationConfig,
    body: dict[str, Any],
    *,
    timeout: float,
) -> Outcome:
    """POST ``body`` to ``config``'s webhook once; what happened, as an :class:`Outcome`."""
    where = f"task {config.task_id} config {config.id!r} at {origin(config.url)}"
    try:
        response = await guard.fetch(
            client,
            "POST",
            config.url,
            headers=tracing.inject(webhook_headers(config)),  # the task's trace continues
            json=body,
            timeout=timeout,
            max_bytes=MAX_REPLY_BYTES,
        )
    except GuardError as exc:
        # Refused address, redirect or oversized reply: sending again would not change it.
        log.warning("push to %s not delivered: %s", where, _guard_reason(str(exc)))
        return Outcome.GIVE_UP
    except ToolError as exc:  # timeout or transport failure (never the URL in the message)
        log.info("push to %s failed: %s", where, type(exc).__name__)
        return Outcome.RETRY
    status = response.status_code
    if 200 <= status < 300:
        return Outcome.DELIVERED
    if status >= 500 or status in _RETRY_STATUS:
        log.info("push to %s failed: HTTP %d", where, status)
        return Outcome.RETRY
    log.warning("push to %s refused by the receiver: HTTP %d", where, status)
    return Outcome.GIVE_UP


def _guard_reason(message: str) -> str:
    """What the guard refused, without the URL its message may carry."""
    if "redirects" in message:
        return "the webhook answered with a redirect (not followed)"
    if "larger than" in message:
        return f"the webhook's reply was larger than {MAX_REPLY_BYTES} bytes"
    return "refused by the URL guard (non-public address or invalid URL)"
