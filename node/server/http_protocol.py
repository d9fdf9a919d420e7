"""uvicorn's httptools protocol, writing a sized response's head and body with one socket write.

uvicorn writes the status line and headers when the app sends ``http.response.start`` and the
body when it sends ``http.response.body``: two ``transport.write`` calls, two ``send`` system
calls and two TCP segments for every JSON answer (a quarter of a registry heartbeat's CPU).
:class:`OneWriteHttpToolsProtocol` holds the head of a response that declares its
``Content-Length`` until the first body message and writes both together. Everything else is
uvicorn's code unchanged: a chunked (streaming, SSE) response, a ``HEAD`` answer and a response
started while the socket's write buffer is full still write the head at once, and every later
body message is written when it is sent, so an event stream flushes per event.

uvicorn builds each request's ``RequestResponseCycle`` inside ``on_headers_complete``; the
protocol changes the class of that cycle (same object, same fields) to :class:`OneWriteCycle`.
``tests/server/test_http_protocol.py`` fails if a uvicorn upgrade moves what this relies on.
"""

from __future__ import annotations

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

__all__ = ["OneWriteCycle", "OneWriteHttpToolsProtocol"]


class _Held(list[bytes]):
    """Stands in for the transport while uvicorn renders a response's head."""

    __slots__ = ()
    write = list.append


class OneWriteCycle(RequestResponseCycle):
    """A request/response cycle that sends a sized response's head with its first body bytes."""

    _head: bytes | None = None  # the rendered head, until the first body message

    async def send(self, message: ASGISendEvent) -> None:
        head = self._head
        if head is not None:
            self._head = None
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                # uvicorn counts the body against Content-Length: count the head in as well
                self.expected_content_length += len(head)
                message = {
                    "type": "http.response.body",
                    "body": head + body,
                    "more_body": message.get("more_body", False),
                }
            elif not self.disconnected:  # uvicorn refuses the message; the head goes first
                self.transport.write(head)
            await super().send(message)
            return
        if (
            message["type"] != "http.response.start"
            or self.response_started
            or self.disconnected
            or self.flow.write_paused
        ):
            await super().send(message)
            return
        # Not paused: uvicorn renders the head without awaiting, so the swap is never observed.
        transport, held = self.transport, _Held()
        self.transport = held  # type: ignore[assignment]
        try:
            await super().send(message)
        finally:
            self.transport = transport
        rendered = b"".join(held)
        if self.chunked_encoding is False and self.scope["method"] != "HEAD":
            self._head = rendered
        else:
            transport.write(rendered)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose cycles are :class:`OneWriteCycle`."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:  # None after an upgrade
            cycle.__class__ = OneWriteCycle
