"""A webhook receiver for push tests: a real Starlette app that records what it is sent.

``Receiver.mode`` decides the answer: ``"ok"`` (204), ``"fail"`` (503), ``"redirect"`` (307 to
``/hook/elsewhere``) or ``"hang"`` (waits until :meth:`Receiver.release`). Every request is
recorded before it is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def state(self) -> str | None:
        """The task state the event carries (Task or status update), else ``None``."""
        for kind in ("task", "statusUpdate"):
            if kind in self.body:
                state: str = self.body[kind]["status"]["state"]
                return state
        return None


@dataclass
class Receiver:
    mode: str = "ok"
    requests: list[Received] = field(default_factory=list)
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            self.requests.append(
                Received(request.url.path, dict(request.headers), await request.json())
            )
            if self.mode == "hang":
                await self._released.wait()
            if self.mode == "redirect":
                return Response(status_code=307, headers={"location": "/hook/elsewhere"})
            return Response(status_code=503 if self.mode == "fail" else 204)

        return Starlette(routes=[Route("/hook/{name}", hook, methods=["POST"])])

    def release(self) -> None:
        """Let hanging requests answer (call before the receiver stops)."""
        self._released.set()


async def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``check`` until it is true, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout}s: {what or check}")
        await asyncio.sleep(0.02)
