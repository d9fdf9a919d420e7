"""A peer's blocking ``SendMessage`` over JSON-RPC 1.0: the SDK client's bytes, fewer layers.

For a coordinator most of a hop's client CPU was the official client's layers around one POST:
the interceptor plumbing, ``MessageToDict`` of the request, httpx's request and response objects
over aiohttp, and ``ParseDict`` of the whole answer (the peer's call records in its metadata
included). :class:`DirectJsonRpc` sends the same request — the same JSON-RPC body (key order,
compact separators, ``ensure_ascii=False``, a fresh ``str(uuid4())`` id) and the same headers in
the same order, built by the same ``httpx.AsyncClient`` once per set of call headers — straight
through the node's :class:`~node.outbound_http.OutboundTransport`, and parses only what
:class:`~node.peers.peer_client.PeerClient` reads of the answer (a task's id, context, status
and artifacts; a message whole). Errors are the SDK's: an HTTP or transport failure goes through
the SDK's own ``handle_http_exceptions`` and a JSON-RPC error through the transport's own
check, so retries, the breaker and the messages are unchanged.

:meth:`DirectJsonRpc.of` gives one only where the result is the SDK's: the client the SDK built
for the card is a plain ``BaseClient`` over ``JsonRpcTransport`` (1.0; not 0.3, no tenant, no
interceptors), sends are not streamed, nothing in its config rewrites the request, and the node's
HTTP client is the plain outbound client (no event hooks, no auth, no redirects). With spans
recorded (``tracing.enabled()``) calls take the SDK path, which records its client spans.
``tests/peers/test_jsonrpc_direct.py`` compares the bytes on the wire with the SDK client's.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import httpx
from a2a.client import Client, ClientCallContext
from a2a.client.base_client import BaseClient
from a2a.client.transports.http_helpers import handle_http_exceptions
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    Task,
    TaskState,
)
from a2a.utils.proto_utils import parse_lenient
from google.protobuf import json_format, struct_pb2

from node.observability import tracing
from node.outbound_http import OutboundTransport, as_httpx_response
from node.outbound_keepalive import sendable

__all__ = ["DirectJsonRpc"]

_JSON = "application/json"
_UNREAD = frozenset({"history", "metadata"})  # of a task answer: PeerClient reads neither
_STATES = {name: number for name, number in TaskState.items()}
_ROLES = {name: number for name, number in Role.items()}
_MESSAGE_IDS = {"messageId": "message_id", "contextId": "context_id", "taskId": "task_id"}
_ARTIFACT_TEXT = {"artifactId": "artifact_id", "name": "name", "description": "description"}
_MESSAGE_FIELDS = frozenset(
    {"message_id", "context_id", "task_id", "role", "parts", "metadata", "extensions"}
)


class DirectJsonRpc:
    """Blocking sends to one peer's JSON-RPC 1.0 interface (module doc); build with :meth:`of`."""

    def __init__(
        self, transport: JsonRpcTransport, http: httpx.AsyncClient, outbound: OutboundTransport
    ) -> None:
        self._transport, self._http, self._outbound = transport, http, outbound
        self.url = transport.url
        self._headers: dict[tuple[Any, ...], tuple[list[tuple[str, str]], bool]] = {}

    @classmethod
    def of(cls, client: Client, http: httpx.AsyncClient) -> DirectJsonRpc | None:
        """The direct sender for ``client`` (made by the SDK's factory), or None (module doc)."""
        if type(client) is not BaseClient:
            return None
        transport, config = client._transport, client._config
        if (
            type(transport) is not JsonRpcTransport
            or transport.httpx_client is not http
            or client._interceptors
            or (config.streaming and client._card.capabilities.streaming)
            or config.polling
            or config.push_notification_config is not None
            or config.accepted_output_modes
            or http.event_hooks["request"]
            or http.event_hooks["response"]
            or http.auth is not None
            or http.follow_redirects
        ):
            return None
        outbound = http._transport_for_url(httpx.URL(transport.url))
        if type(outbound) is not OutboundTransport:
            return None
        return cls(transport, http, outbound)

    @property
    def usable(self) -> bool:
        """False while spans are recorded or once the HTTP client is closed: the SDK path then."""
        return not tracing.enabled() and not self._http.is_closed

    async def send_message(
        self, request: SendMessageRequest, context: ClientCallContext
    ) -> Task | Message:
        """``Client.send_message`` for a blocking send: the task (as read) or the message."""
        payload = {
            "method": "SendMessage",
            "params": _request_params(request),
            "id": str(uuid.uuid4()),
            "jsonrpc": "2.0",
        }
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = await self._post(body.encode(), context)
        result = self._transport._check_jsonrpc_response(data)["result"]
        task = result.get("task") if type(result) is dict and len(result) == 1 else None
        if type(task) is dict:  # the usual answer: read what PeerClient reads, nothing else
            read = {k: v for k, v in task.items() if k not in _UNREAD}
            parsed = answer_task(read)
            if parsed is not None:
                return parsed
            result = {"task": read}
        response = parse_lenient(result, SendMessageResponse())  # as the SDK's client does
        if response.HasField("task"):
            return response.task
        if response.HasField("message"):
            return response.message
        raise ValueError("Response has neither task nor message")

    async def _post(self, body: bytes, context: ClientCallContext) -> Any:
        """POST ``body`` as the SDK's ``_send_request`` does; its JSON answer (SDK errors)."""
        assert context.timeout is not None  # PeerClient always bounds its calls
        prefix, plain = self._prefix(context.service_parameters or {})
        headers = [*prefix, ("content-length", str(len(body))), ("content-type", _JSON)]
        with handle_http_exceptions():
            answer = await self._outbound.post_whole(
                self.url, headers, body, context.timeout, sendable=plain
            )
            encoding = answer.header("content-encoding", "identity").lower()
            if answer.status // 100 == 2 and encoding == "identity":
                return json.loads(answer.body)
            request = httpx.Request("POST", self.url, headers=headers, content=body)
            response = as_httpx_response(answer, request)
            await response.aread()  # decoded as httpx decodes it
            response.raise_for_status()
            return response.json()

    def _prefix(self, call_headers: dict[str, str]) -> tuple[list[tuple[str, str]], bool]:
        """httpx's headers for this request up to its content headers, made once per set, and
        whether they may go over a kept-alive connection (:func:`sendable`, with the content
        headers)."""
        key = (tuple(self._http.headers.raw), *call_headers.items())
        known = self._headers.get(key)
        if known is None:
            built = self._http.build_request("POST", self.url, content=b"", headers=call_headers)
            prefix = [
                (name, value)
                for name, value in built.headers.multi_items()
                if name not in ("content-length", "content-type")
            ]
            plain = sendable([*prefix, ("content-length", "0"), ("content-type", _JSON)])
            if len(self._headers) >= 32:  # call headers are a token or a trace: a few at most
                self._headers.clear()
            self._headers[key] = known = (prefix, plain)
        return known


def answer_task(doc: dict[str, Any]) -> Task | None:
    """``ParseDict(doc, Task())`` for the usual shape of a peer's answer, or None for any other.

    Ids, a status (state, a message of text and data parts, a timestamp) and artifacts of text
    and data parts, every field of the type ParseDict wants: built directly (~10x cheaper).
    Anything else (another field, another part kind, a wrong type, a bad time) is None, and the
    caller's ParseDict decides, raising its own errors.
    """
    try:
        return _task(doc)
    except _NotPlain:
        return None


def _task(doc: dict[str, Any]) -> Task:
    task = Task()
    for key, value in doc.items():
        if key == "id" and type(value) is str:
            task.id = value
        elif key == "contextId" and type(value) is str:
            task.context_id = value
        elif key == "status" and type(value) is dict:
            _status(task, value)
        elif key == "artifacts" and type(value) is list:
            for item in value:
                _artifact(task.artifacts.add(), item)
        else:
            raise _NotPlain
    return task


def _status(task: Task, doc: dict[str, Any]) -> None:
    status = task.status
    status.SetInParent()
    for key, value in doc.items():
        if key == "state" and type(value) is str and value in _STATES:
            status.state = _STATES[value]
        elif key == "message" and type(value) is dict:
            _message(status.message, value)
        elif key == "timestamp" and type(value) is str:
            try:
                status.timestamp.FromJsonString(value)
            except ValueError:
                raise _NotPlain from None
        else:
            raise _NotPlain


def _message(message: Message, doc: dict[str, Any]) -> None:
    message.SetInParent()
    for key, value in doc.items():
        if key in _MESSAGE_IDS and type(value) is str:
            setattr(message, _MESSAGE_IDS[key], value)
        elif key == "role" and type(value) is str and value in _ROLES:
            message.role = _ROLES[value]
        elif key == "parts" and type(value) is list:
            for item in value:
                _read_part(message.parts.add(), item)
        else:
            raise _NotPlain


def _artifact(artifact: Any, doc: Any) -> None:
    if type(doc) is not dict:
        raise _NotPlain
    for key, value in doc.items():
        if key in _ARTIFACT_TEXT and type(value) is str:
            setattr(artifact, _ARTIFACT_TEXT[key], value)
        elif key == "parts" and type(value) is list:
            for item in value:
                _read_part(artifact.parts.add(), item)
        else:
            raise _NotPlain


def _read_part(part: Part, doc: Any) -> None:
    if type(doc) is not dict or len(doc) != 1:
        raise _NotPlain
    if type(doc.get("text")) is str:
        part.text = doc["text"]
    elif "data" in doc:
        _set_value(part.data, doc["data"])
    else:
        raise _NotPlain


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    """ParseDict's reading of a JSON value into a ``Value`` (numbers as doubles)."""
    kind = type(value)
    if kind is dict:
        target.struct_value.Clear()  # present even when empty, as ParseDict leaves it
        target.struct_value.update(value)
    elif kind is list:
        target.list_value.Clear()
        target.list_value.extend(value)
    elif kind is str:
        target.string_value = value
    elif kind is bool:
        target.bool_value = value
    elif kind is int or kind is float:
        target.number_value = value
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    else:
        raise _NotPlain


def _request_params(request: SendMessageRequest) -> dict[str, Any]:
    """``MessageToDict(request)``: built directly for a plain message, else by json_format."""
    try:
        return _plain_params(request)
    except _NotPlain:
        params: dict[str, Any] = json_format.MessageToDict(request)
        return params


class _NotPlain(Exception):
    """The request holds something :func:`_plain_params` leaves to json_format."""


def _plain_params(request: SendMessageRequest) -> dict[str, Any]:
    """The JSON of a request whose message has only ids, role, text/data parts, metadata and
    extensions, and whose configuration at most ``historyLength``: the same dict, in the same
    order, as ``MessageToDict`` (fields in number order, numbers as floats)."""
    fields = {f.name for f, _ in request.ListFields()}
    if not fields <= {"message", "configuration"}:
        raise _NotPlain
    out: dict[str, Any] = {}
    if "message" in fields:
        message = request.message
        names = {f.name for f, _ in message.ListFields()}
        if not names <= _MESSAGE_FIELDS:
            raise _NotPlain
        doc: dict[str, Any] = {}
        if message.message_id:
            doc["messageId"] = message.message_id
        if message.context_id:
            doc["contextId"] = message.context_id
        if message.task_id:
            doc["taskId"] = message.task_id
        if message.role:
            doc["role"] = Role.Name(message.role)
        if message.parts:
            doc["parts"] = [_part(p) for p in message.parts]
        if "metadata" in names:
            doc["metadata"] = _struct(message.metadata)
        if message.extensions:
            doc["extensions"] = list(message.extensions)
        out["message"] = doc
    if "configuration" in fields:
        config = request.configuration
        if {f.name for f, _ in config.ListFields()} - {"history_length"} or not (
            config.HasField("history_length")
        ):
            raise _NotPlain
        out["configuration"] = {"historyLength": config.history_length}
    return out


def _part(part: Part) -> dict[str, Any]:
    kind = [f.name for f, _ in part.ListFields()]
    if kind == ["text"]:
        return {"text": part.text}
    if kind == ["data"]:
        return {"data": _value(part.data)}
    raise _NotPlain


def _struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    fields = struct.fields
    return {key: _value(fields[key]) for key in fields}


def _value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return _struct(value.struct_value)
    if kind == "list_value":
        return [_value(v) for v in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):  # json_format raises its own error for these
            raise _NotPlain
        return number
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or nothing set (json_format prints null for both)
