"""Finite numbers in a parsed protobuf request (the gRPC edge's counterpart of ``BodyGuard``).

JSON bodies are checked before parsing at the HTTP edge (:mod:`node.server.http_guards`). A gRPC
request arrives as protobuf: a ``NaN`` or ``±Infinity`` in a ``google.protobuf.Value`` would be
stored in a task that then cannot be read back (JSON has no such numbers). :func:`check_request`
walks any request message (A2A 1.0 or 0.3) down to its ``Struct``/``Value`` data and raises
``InvalidParamsError`` naming the first such field (``message.parts[0].data.x``). Depth needs no
check here: protobuf refuses to decode more than 100 nested messages.
"""

from __future__ import annotations

import math

from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

__all__ = ["check_request"]

_LITERALS = {math.inf: "Infinity", -math.inf: "-Infinity"}


def check_request(request: Message) -> None:
    """Raise ``InvalidParamsError`` naming the first non-finite number in ``request``."""
    _message(request, "")


def _message(message: Message, path: str) -> None:
    if isinstance(message, Value | Struct | ListValue):
        _json(message, path)
        return
    for field, value in message.ListFields():
        if field.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        name = f"{path}.{field.json_name}" if path else field.json_name
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE:
                for key, item in value.items():
                    _message(item, f"{name}.{key}")
        elif field.is_repeated:
            for index, item in enumerate(value):
                _message(item, f"{name}[{index}]")
        else:
            _message(value, name)


def _json(value: Value | Struct | ListValue, path: str) -> None:
    if isinstance(value, Struct):
        for key, item in value.fields.items():
            _json(item, f"{path}.{key}")
    elif isinstance(value, ListValue):
        for index, item in enumerate(value.values):
            _json(item, f"{path}[{index}]")
    else:
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            _json(value.struct_value, path)
        elif kind == "list_value":
            _json(value.list_value, path)
        elif kind == "number_value" and not math.isfinite(value.number_value):
            literal = _LITERALS.get(value.number_value, "NaN")
            raise InvalidParamsError(
                f"{path or '(request)'}: {literal} is not a finite number "
                "(JSON has no NaN or Infinity)"
            )
