"""The HTTP edge's body guard: what reaches the a2a-sdk handlers is JSON the stores can keep.

One ASGI middleware checks every POST to the JSON-RPC path or under the REST prefix, before any
handler parses it (the request-body limit runs first, so the body here is bounded):

- content type ``application/json`` or ``application/a2a+json`` (JSON-RPC -32005; REST 400);
- valid UTF-8 (JSON-RPC -32700 "parse error"; REST 400), and valid JSON;
- nesting at most :data:`MAX_DEPTH` levels (JSON-RPC -32600; REST 400): the SDK's parser would
  otherwise fail with a ``RecursionError`` reported as an internal error;
- finite numbers only (JSON-RPC -32602 naming the field; REST 400): ``NaN``, ``Infinity`` and
  literals that overflow a double (``1e400``) are accepted by Python's parser, stored in a task,
  and then make every read of that task fail, because JSON (and protobuf's JSON form) has no way
  to write them back.

The body is read once and replayed to the app unchanged. The checks cost one extra ``json.loads``
of a request that is bounded in size; a request whose bytes cannot hold a deep document (fewer
opening brackets than the limit) is not walked at all.
"""

from __future__ import annotations

import json
import math
from typing import Any

from a2a.utils.error_handlers import build_error_details, build_rest_error_payload
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
)
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["JSON_TYPES", "MAX_DEPTH", "BodyGuard", "check_json_body"]

JSON_TYPES = ("application/json", "application/a2a+json")
MAX_DEPTH = 64  # levels of arrays/objects in one request; A2A messages need fewer than ten
_MAX_INT_DIGITS = 300  # an integer literal beyond this overflows a double (protobuf numbers)


class _NonFinite:
    """Marks where a non-finite number stood in a parsed body."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _float(literal: str) -> float | _NonFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NonFinite(literal)


def _int(literal: str) -> int | _NonFinite:
    digits = len(literal) - (literal[0] == "-")
    return int(literal) if digits <= _MAX_INT_DIGITS else _NonFinite(literal[:20] + "…")


def _find(value: Any, path: str, depth: int) -> tuple[str, str | None]:
    """``(where, literal)`` of the first non-finite number (literal None), or the depth bound."""
    if isinstance(value, _NonFinite):
        return path or "(body)", value.literal
    if depth > MAX_DEPTH:
        return path or "(body)", None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _find(item, f"{path}.{key}" if path else str(key), depth + 1)
            if found[0]:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, f"{path}[{index}]", depth + 1)
            if found[0]:
                return found
    return "", None


def check_json_body(body: bytes) -> Any:
    """Parse ``body``; raise an ``A2AError`` naming what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONParseError(f"request body is not valid UTF-8 (byte {exc.start})") from None
    seen: list[bool] = []

    def non_finite(literal: str) -> _NonFinite:
        seen.append(True)
        return _NonFinite(literal)

    def checked_float(literal: str) -> float | _NonFinite:
        value = _float(literal)
        if isinstance(value, _NonFinite):
            seen.append(True)
        return value

    def checked_int(literal: str) -> int | _NonFinite:
        value = _int(literal)
        if isinstance(value, _NonFinite):
            seen.append(True)
        return value

    try:
        data = json.loads(
            text, parse_constant=non_finite, parse_float=checked_float, parse_int=checked_int
        )
    except RecursionError:
        raise InvalidRequestError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONParseError(f"malformed JSON: {exc.msg} at line {exc.lineno}") from None
    if seen or body.count(b"[") + body.count(b"{") > MAX_DEPTH:
        where, literal = _find(data, "", 1)
        if where and literal is None:
            raise InvalidRequestError(f"JSON nested deeper than {MAX_DEPTH} levels")
        if where:
            message = f"{where}: {literal} is not a finite number (JSON has no NaN or Infinity)"
            if where == "id" or where.startswith(("id.", "id[")):
                raise InvalidRequestError(message)
            raise InvalidParamsError(message)
    return data


def _request_id(body: bytes) -> str | int | None:
    """The JSON-RPC id of an otherwise bad request, when it can be read."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict):
        value = data.get("id")
        if isinstance(value, str | int) and not isinstance(value, bool):
            return value
    return None


class BodyGuard:
    """Refuse JSON-RPC and REST request bodies the handlers cannot take safely (see module)."""

    def __init__(self, app: ASGIApp, *, rpc_path: str = "/", rest_prefix: str = "/rest") -> None:
        self.app = app
        self.rpc_path = rpc_path
        self.rest_prefix = rest_prefix.rstrip("/") + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        is_rpc = path == self.rpc_path
        if not is_rpc and not path.startswith(self.rest_prefix):
            await self.app(scope, receive, send)
            return
        content_type = Headers(scope=scope).get("content-type", "")
        if content_type.split(";")[0].strip().lower() not in JSON_TYPES:
            error = ContentTypeNotSupportedError(
                f"content type {content_type or '(none)'!r} is not supported; send application/json"
            )
            await self._refuse(error, is_rpc, None, scope, receive, send)
            return
        body, more = await _read_body(receive)
        if body:
            try:
                check_json_body(body)
            except A2AError as error:
                await self._refuse(error, is_rpc, body, scope, receive, send)
                return
        await self.app(scope, _replay(body, more, receive), send)

    @staticmethod
    async def _refuse(
        error: A2AError,
        is_rpc: bool,
        body: bytes | None,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        if is_rpc:
            request_id = (
                _request_id(body) if body and not isinstance(error, JSONParseError) else None
            )
            response = JSONResponse(_rpc_error(request_id, error), status_code=200)
        else:
            if isinstance(error, JSONParseError):  # REST has no parse-error status of its own
                error = InvalidRequestError(str(error))
            payload = build_rest_error_payload(error)
            response = JSONResponse(payload, status_code=payload["error"]["code"])
        await response(scope, receive, send)


def _rpc_error(request_id: str | int | None, error: A2AError) -> dict[str, Any]:
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
    detail = {"code": code, "message": str(error), "data": build_error_details(error)}
    return {"jsonrpc": "2.0", "id": request_id, "error": detail}


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole request body; ``more`` is False when the client disconnected meanwhile."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), False
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), True


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            if complete:
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}
        return await receive()

    return replay
