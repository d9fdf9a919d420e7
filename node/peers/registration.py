"""Keeping this node listed in the registry: register, heartbeat, re-register, deregister.

``RegistryLink.start()`` runs a background task: it registers (``POST /v1/agents`` with
``{"card_url"}`` and the bearer token), retrying with capped exponential backoff while the
registry is down (the node keeps serving meanwhile), then heartbeats every ``heartbeat_s``
(``PUT /v1/agents/{id}/heartbeat``); a 404 means the registry forgot us, so it registers again.
``aclose()`` stops the task and deregisters (``DELETE /v1/agents/{id}``), best effort, briefly.
A refused registration is logged with the registry's own reason (its error body).

Several replicas of one node share one registration (same id, same public URL; re-registering
an unchanged card is a heartbeat). One replica stopping must not delete what the others still
hold, or they get 404 and re-register. A replica cannot tell cheaply whether another is alive (a
replica with no running task holds no lease), so the rule is by store: with ``deregister=False``
(the node's runtime passes it for a store replicas can share, PostgreSQL) ``aclose()`` only stops
heartbeating and leaves the entry to the registry's TTL (``evict_after``), which removes it once
the last replica stops; a node on SQLite or memory runs alone and deregisters at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import Callable

import httpx

from node.errors import NodeError, RegistryError
from node.peers.registry_client import bearer

__all__ = ["RegistryLink"]

log = logging.getLogger(__name__)
Token = str | Callable[[], str | None] | None


def _refusal(response: httpx.Response, card_url: str) -> str:
    """The registry's reason for refusing a registration, from its error body, with a hint."""
    code, reason = "", response.text[:300].strip()
    with contextlib.suppress(ValueError):
        error = response.json().get("error")
        if isinstance(error, dict):
            code, reason = str(error.get("code", "")), str(error.get("message", reason))
    text = f"registration refused ({response.status_code} {code or response.reason_phrase}): "
    text += reason or "no reason given"
    cidr = _cidr_of(httpx.URL(card_url).host)
    if code == "url_refused" and cidr:
        text += (
            f"; start the registry with --allow-cidr {cidr} so it may fetch this node's card, "
            "or give this node a --public-url it can reach"
        )
    return text


def _cidr_of(host: str) -> str | None:
    """The network to allow for a private card host (``None`` for public or named hosts)."""
    if host == "localhost":
        return "127.0.0.0/8"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.is_global:
        return None
    if address.is_loopback:
        return "127.0.0.0/8" if address.version == 4 else "::1/128"
    return f"{address}/{address.max_prefixlen}"


class RegistryLink:
    """This node's registration with one registry."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        registry_url: str,
        token: Token,
        card_url: str,
        heartbeat_s: float = 10.0,
        *,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        request_timeout_s: float = 5.0,
        close_timeout_s: float = 2.0,
        deregister: bool = True,
    ) -> None:
        self._http, self._token, self.card_url = http, token, card_url
        self._agents = registry_url.rstrip("/") + "/v1/agents"
        self.heartbeat_s = heartbeat_s
        self._backoff = (backoff_initial_s, backoff_max_s)
        self._timeout, self._close_timeout = request_timeout_s, close_timeout_s
        self.deregister = deregister
        self.agent_id: str | None = None  # set while registered
        self.registrations = 0
        self.heartbeats = 0
        self.failures = 0  # failed registrations or heartbeats
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="registry-link")

    async def aclose(self) -> None:
        """Stop the task and deregister (unless shared), best effort within ``close_timeout_s``."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.agent_id is None or not self.deregister:
            return
        try:
            url = f"{self._agents}/{self.agent_id}"
            response = await self._request("DELETE", url, timeout_s=self._close_timeout)
            if response.status_code not in (200, 204, 404):
                response.raise_for_status()
            self.agent_id = None
        except (httpx.HTTPError, NodeError) as exc:
            log.warning("could not deregister from %s: %s", self._agents, exc)

    async def _run(self) -> None:
        delay = self._backoff[0]
        while True:
            try:
                if self.agent_id is None:
                    await self._register()
                    delay = self._backoff[0]
                await asyncio.sleep(self.heartbeat_s)
                await self._heartbeat()
            except (httpx.HTTPError, NodeError, ValueError) as exc:
                self.failures += 1
                log.warning("registry %s: %s; retrying in %.1fs", self._agents, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff[1])

    async def _request(
        self, method: str, url: str, *, timeout_s: float, json: object = None
    ) -> httpx.Response:
        token = self._token() if callable(self._token) else self._token
        return await self._http.request(
            method, url, json=json, headers=bearer(token), timeout=timeout_s
        )

    async def _register(self) -> None:
        response = await self._request(
            "POST", self._agents, json={"card_url": self.card_url}, timeout_s=self._timeout
        )
        if response.status_code in (401, 403):
            raise RegistryError(f"registration refused ({response.status_code}): check the token")
        if response.is_error:
            raise RegistryError(_refusal(response, self.card_url))
        body = response.json()
        if not isinstance(body, dict) or not isinstance(body.get("id"), str):
            raise RegistryError("registration answer has no 'id'")
        self.agent_id = body["id"]
        self.registrations += 1
        log.info("registered with %s as %s", self._agents, self.agent_id)

    async def _heartbeat(self) -> None:
        url = f"{self._agents}/{self.agent_id}/heartbeat"
        response = await self._request("PUT", url, timeout_s=self._timeout)
        if response.status_code == 404:
            log.warning(
                "registry %s forgot agent %s; registering again", self._agents, self.agent_id
            )
            self.agent_id = None
            return
        response.raise_for_status()
        self.heartbeats += 1
