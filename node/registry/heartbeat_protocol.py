"""Heartbeats of remembered agents answered inside uvicorn's HTTP protocol, with no ASGI call.

At 10,000 heartbeats/s the ASGI machinery is most of a heartbeat's cost: per request uvicorn
makes a task, an event, a request-response cycle and a scope, and writes the head and the body
apart; measured on loopback, a minimal ASGI app costs ~45 µs of CPU per request on uvloop and
httptools where the same answer from httptools' parser callbacks costs ~10 µs (bench/RESULTS.md).

:class:`HeartbeatProtocol` is uvicorn's :class:`HttpToolsProtocol` with one shortcut: a request
that is exactly a plain heartbeat (``PUT /v1/agents/{id}/heartbeat``, HTTP/1.1 kept alive, no
query, no escapes, no body, no ``Expect``, nothing else in flight on the connection) that passes
the same gate and id check, for an agent this replica remembers with its answer's fixed part
kept (:meth:`HeartbeatAnswers.hit`), is answered when its message completes: head and body in
one write, the same bytes uvicorn writes for :class:`HeartbeatRoute`'s answer, then uvicorn's own
end of response (keep-alive timer, request count). Any other request, and any of these the
shortcut declines (nothing done then), takes uvicorn's path to the app unchanged: errors,
misses and evicted agents are answered there.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import Headers
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from node.errors import RegistryError
from node.registry.heartbeat_route import HEADERS, HeartbeatAnswers, heartbeat_id
from node.registry.service import check_agent_id

_DECLINE = frozenset((b"content-length", b"transfer-encoding", b"expect", b"upgrade"))
"""Headers the shortcut leaves to uvicorn (``Content-Length: 0`` excepted)."""


class HeartbeatProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering plain heartbeats of remembered agents itself."""

    answers: HeartbeatAnswers  # set by heartbeat_protocol()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._ready: bytes | None = None  # the answer to write when the message completes

    def on_headers_complete(self) -> None:
        self._ready = self._shortcut()
        if self._ready is None:
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._ready is None:  # the shortcut takes no body (declined above)
            super().on_body(body)

    def on_message_complete(self) -> None:
        ready = self._ready
        if ready is None:
            super().on_message_complete()
            return
        self._ready = None
        self.transport.write(ready)
        self.on_response_complete()

    def _shortcut(self) -> bytes | None:
        """The whole response, when this request is a plain heartbeat the shortcut answers."""
        parser = self.parser
        if (
            parser.get_method() != b"PUT"
            or parser.get_http_version() != "1.1"
            or not parser.should_keep_alive()
            or self.root_path
            or b"?" in self.url
            or b"%" in self.url
            or self.pipeline
            or (self.cycle is not None and not self.cycle.response_complete)
            or self.flow.write_paused
        ):
            return None
        for name, value in self.headers:
            if name in _DECLINE and (name != b"content-length" or value.strip() != b"0"):
                return None
        path = self.url.decode("ascii", "replace")
        agent_id = heartbeat_id(path)
        if agent_id is None:
            return None
        answers = self.answers
        try:
            answers.gate.check({"path": path, "method": "PUT"}, Headers(raw=self.headers))
            body = answers.hit(check_agent_id(agent_id))
        except RegistryError:
            return None  # the app answers it (the same checks, the error's body)
        if body is None:
            return None
        head = [STATUS_LINE[200]]
        fields = [
            *self.server_state.default_headers,
            (b"content-length", str(len(body)).encode()),
            HEADERS,
        ]
        for name, value in fields:
            head += (name.lower(), b": ", value, b"\r\n")
        head += (b"\r\n", body)
        return b"".join(head)


def heartbeat_protocol(answers: HeartbeatAnswers) -> type[HeartbeatProtocol]:
    """:class:`HeartbeatProtocol` answering with ``answers`` (uvicorn's ``http`` setting)."""
    return type("RegistryHeartbeatProtocol", (HeartbeatProtocol,), {"answers": answers})
