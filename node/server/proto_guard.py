"""Finite numbers and bounded nesting in a parsed protobuf request (the gRPC edge's check).

JSON bodies are checked before parsing at the HTTP edge (:mod:`node.server.http_guards`). A gRPC
request arrives parsed: a ``NaN`` or ``±Infinity`` in a ``google.protobuf.Value`` would be stored
in a task that then cannot be read back (JSON has no such numbers). :func:`check_request` walks
any request message (A2A 1.0 or 0.3) down to its ``Struct``/``Value`` data and raises
``InvalidParamsError`` naming the first such field (``message.parts[0].data.x``), or
``InvalidRequestError`` past :data:`~node.server.http_guards.MAX_DEPTH` levels of JSON nesting,
the same limits as the HTTP edge.
"""

from __future__ import annotations

import math

from a2a.utils.errors import InvalidParamsError, InvalidRequestError
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

from node.server.http_guards import MAX_DEPTH

__all__ = ["check_request"]

_LITERALS = {math.inf: "Infinity", -math.inf: "-Infinity"}


def check_request(request: Message) -> None:
    """Raise an ``A2AError`` naming the first non-finite number or over-deep JSON value."""
    _message(request, "", 0)


def _message(message: Message, path: str, depth: int) -> None:
    if isinstance(message, Value | Struct | ListValue):
        _json(message, path, depth)
        return
    for field, value in message.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        name = f"{path}.{field.json_name}" if path else field.json_name
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for key, item in value.items():
                    _message(item, f"{name}.{key}", depth)
        elif field.is_repeated:
            for index, item in enumerate(value):
                _message(item, f"{name}[{index}]", depth)
        else:
            _message(value, name, depth)


def _json(value: Value | Struct | ListValue, path: str, depth: int) -> None:
    if isinstance(value, Value):
        kind = value.WhichOneof("kind")
        if kind == "number_value":
            number = value.number_value
            if not math.isfinite(number):
                literal = _LITERALS.get(number, "NaN")
                raise InvalidParamsError(
                    f"{path or '(request)'}: {literal} is not a finite number "
                    "(JSON has no NaN or Infinity)"
                )
        elif kind == "struct_value":
            _json(value.struct_value, path, depth)
        elif kind == "list_value":
            _json(value.list_value, path, depth)
        return
    depth += 1
    if depth > MAX_DEPTH:
        raise InvalidRequestError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Struct):
        for key, item in value.fields.items():
            _json(item, f"{path}.{key}", depth)
    else:
        for index, item in enumerate(value.values):
            _json(item, f"{path}[{index}]", depth)
