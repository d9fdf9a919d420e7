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
protocol changes the class of that cycle (same object, same fields) to :class:`OneWriteCycle`,
whose ``send`` is uvicorn's with the head held (:data:`UVICORN` is the version it was copied
from). ``tests/server/test_http_protocol.py`` compares the bytes with uvicorn's over many response
shapes and fails on another uvicorn version, until this module is checked against it.
"""

from __future__ import annotations

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.httptools_impl import (
    HEADER_RE,
    HEADER_VALUE_RE,
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

__all__ = ["UVICORN", "OneWriteCycle", "OneWriteHttpToolsProtocol"]

UVICORN = "0.54.0"  # the uvicorn whose RequestResponseCycle.send OneWriteCycle.send follows


class OneWriteCycle(RequestResponseCycle):
    """A request/response cycle that sends a sized response's head with its first body bytes.

    :meth:`send` is uvicorn 0.54's ``RequestResponseCycle.send`` with two changes, marked
    ``# one write``: the head of a response with a ``Content-Length`` (not ``HEAD``) is kept, and
    written with the first body message. (Calling uvicorn's method around a held write cost more
    Python time than the saved system call.)
    """

    _head: bytes | None = None  # the rendered head, until the first body message

    async def send(self, message: ASGISendEvent) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()

        if self.disconnected:
            return

        if not self.response_started:
            if message["type"] != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{message['type']}'."
                )
            self.response_started = True
            self.waiting_for_100_continue = False

            status_code = message["status"]
            headers = self.default_headers + list(message.get("headers", []))

            if self.access_log:
                self.access_logger.info(
                    '%s - "%s %s HTTP/%s" %d',
                    get_client_addr(self.scope),
                    self.scope["method"],
                    get_path_with_query_string(self.scope),
                    self.scope["http_version"],
                    status_code,
                )

            content = [STATUS_LINE[status_code]]
            has_connection_close = False
            for name, value in headers:
                if HEADER_RE.search(name):
                    raise RuntimeError("Invalid HTTP header name.")
                if HEADER_VALUE_RE.search(value):
                    raise RuntimeError("Invalid HTTP header value.")
                name = name.lower()
                if name == b"content-length" and self.chunked_encoding is None:
                    self.expected_content_length = int(value.decode())
                    self.chunked_encoding = False
                elif name == b"transfer-encoding" and value.lower() == b"chunked":
                    self.expected_content_length = 0
                    self.chunked_encoding = True
                elif name == b"connection":
                    connection = [token.lower().strip() for token in value.split(b",")]
                    if b"close" in connection:
                        self.keep_alive = False
                        has_connection_close = True
                content.extend([name, b": ", value, b"\r\n"])

            if not self.keep_alive and not has_connection_close:
                content.append(b"connection: close\r\n")

            if (
                self.chunked_encoding is None
                and self.scope["method"] != "HEAD"
                and status_code not in (204, 304)
            ):
                self.chunked_encoding = True
                content.append(b"transfer-encoding: chunked\r\n")

            content.append(b"\r\n")
            if self.chunked_encoding is False and self.scope["method"] != "HEAD":  # one write
                self._head = b"".join(content)
            else:
                self.transport.write(b"".join(content))

        elif not self.response_complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.body', but got '{message['type']}'."
                )
            body = message.get("body", b"")
            more_body = message.get("more_body", False)

            if self.scope["method"] == "HEAD":
                self.expected_content_length = 0
            elif self.chunked_encoding:
                content = [b"%x\r\n" % len(body), body, b"\r\n"] if body else []
                if not more_body:
                    content.append(b"0\r\n\r\n")
                self.transport.write(b"".join(content))
            else:
                num_bytes = len(body)
                if num_bytes > self.expected_content_length:
                    raise RuntimeError("Response content longer than Content-Length")
                self.expected_content_length -= num_bytes
                head = self._head
                if head is not None:  # one write
                    self._head = None
                    self.transport.write(head + body)
                else:
                    self.transport.write(body)

            if not more_body:
                if self.expected_content_length != 0:
                    raise RuntimeError("Response content shorter than Content-Length")
                self.response_complete = True
                self.message_event.set()
                if not self.keep_alive:
                    self.transport.close()
                self.on_response()

        else:
            raise RuntimeError(
                f"Unexpected ASGI message '{message['type']}' sent, after response already "
                "completed."
            )


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose cycles are :class:`OneWriteCycle`."""

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if type(cycle) is RequestResponseCycle:  # None after an upgrade
            cycle.__class__ = OneWriteCycle
