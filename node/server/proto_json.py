"""``MessageToDict`` from a plan per field: the same dict as protobuf's, in a third of the time.

``google.protobuf.json_format.MessageToDict`` decides, for every field of every message it
converts, what kind of field it is (map, repeated, enum, bytes, int64, float, well-known type)
by reading its descriptor again. :func:`message_to_dict` reads ``ListFields()`` the same way
(so the same fields, in the same order) but looks each field's converter up in a table built the
first time the field is seen, from json_format's own rules:

- enums: each value's JSON string is asked of json_format's printer once (the ``json_name``
  option included); an unknown number goes to the printer;
- strings ``str``, bools ``bool``, 64-bit integers quoted, 32-bit integers as they are; bytes,
  floats and doubles go to the printer (base64, NaN/Infinity, shortest float);
- maps and repeated fields as json_format builds them; ``Struct``, ``Value``, ``ListValue``
  directly; ``Timestamp``, ``Duration``, ``FieldMask`` by their ``ToJsonString``; ``Any`` and the
  wrapper types by the printer.

Only the default options are served (what the SDK's JSON-RPC dispatcher asks for); any other
option, and any error (a non-finite ``Value`` number, a closed enum's unknown number), is handed
to json_format itself, so errors are its own. ``tests/server/test_proto_json.py`` compares both
over every message type of ``a2a.proto`` filled at random.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["message_to_dict"]

Convert = Callable[[Any], Any]
_F = FieldDescriptor
_PRINTER = json_format._Printer()  # the default options: the one whose rules are planned here
_ORIGINAL = json_format.MessageToDict
_fields: dict[FieldDescriptor, tuple[str, Convert]] = {}
_messages: dict[Descriptor, Convert] = {}


def message_to_dict(message: Message, **options: Any) -> Any:
    """``json_format.MessageToDict(message, **options)``, faster for the default options."""
    if options and options != {"preserving_proto_field_name": False}:
        return _ORIGINAL(message, **options)
    try:
        return _message(message)
    except Exception:  # json_format raises its own error, with its own message
        return _ORIGINAL(message)


def _message(message: Message) -> Any:
    desc = message.DESCRIPTOR
    convert = _messages.get(desc)
    if convert is None:
        convert = _messages[desc] = _message_converter(desc)
    return convert(message)


def _regular(message: Message) -> dict[str, Any]:
    js: dict[str, Any] = {}
    for field, value in message.ListFields():
        planned = _fields.get(field)
        if planned is None:
            planned = _fields[field] = _field_plan(field)
        js[planned[0]] = planned[1](value)
    return js


def _value(message: Any) -> Any:
    which = message.WhichOneof("kind")
    if which == "string_value":
        return str(message.string_value)
    if which == "number_value":
        number = message.number_value
        if number - number != 0:  # inf or nan: json_format raises
            raise ValueError("non-finite Value.number_value")
        return number
    if which == "struct_value":
        return _struct(message.struct_value)
    if which == "list_value":
        return [_value(item) for item in message.list_value.values]
    if which == "bool_value":
        return bool(message.bool_value)
    return None  # null_value, or no kind set


def _struct(message: Any) -> dict[str, Any]:
    fields = message.fields
    return {key: _value(fields[key]) for key in fields}


def _list_value(message: Any) -> list[Any]:
    return [_value(item) for item in message.values]


def _to_json_string(message: Any) -> Any:
    return message.ToJsonString()


_WELL_KNOWN: dict[str, Convert] = {
    "google.protobuf.Struct": _struct,
    "google.protobuf.Value": _value,
    "google.protobuf.ListValue": _list_value,
    "google.protobuf.Timestamp": _to_json_string,
    "google.protobuf.Duration": _to_json_string,
    "google.protobuf.FieldMask": _to_json_string,
}


def _message_converter(desc: Descriptor) -> Convert:
    well_known = _WELL_KNOWN.get(desc.full_name)
    if well_known is not None:
        return well_known
    if desc.file.name == "google/protobuf/wrappers.proto" or desc.full_name in (
        json_format._WKTJSONMETHODS  # Any, and any well-known type not planned above
    ):
        printer: Convert = _PRINTER._MessageToJsonObject
        return printer
    return _regular


def _field_plan(field: FieldDescriptor) -> tuple[str, Convert]:
    name = f"[{field.full_name}]" if field.is_extension else field.json_name
    if json_format._IsMapEntry(field):
        value_field = field.message_type.fields_by_name["value"]
        convert_value = _scalar(value_field)

        def convert_map(value: Any) -> dict[str, Any]:
            return {
                ("true" if key else "false") if isinstance(key, bool) else str(key): convert_value(
                    value[key]
                )
                for key in value
            }

        return name, convert_map
    one = _scalar(field)
    if field.is_repeated:
        return name, lambda value: [one(item) for item in value]
    return name, one


def _scalar(field: FieldDescriptor) -> Convert:
    """The converter of one value of ``field`` (json_format's ``_FieldToJsonObject``)."""
    cpp = field.cpp_type
    if cpp == _F.CPPTYPE_MESSAGE:
        return _message
    if cpp == _F.CPPTYPE_ENUM:
        names = {
            number: _PRINTER._FieldToJsonObject(field, number)
            for number in field.enum_type.values_by_number
        }

        def enum(value: int) -> Any:
            return names[value] if value in names else _PRINTER._FieldToJsonObject(field, value)

        return enum
    if cpp == _F.CPPTYPE_STRING and field.type != _F.TYPE_BYTES:
        return str
    if cpp == _F.CPPTYPE_BOOL:
        return bool
    if cpp in (_F.CPPTYPE_INT64, _F.CPPTYPE_UINT64):
        return str
    if cpp in (_F.CPPTYPE_INT32, _F.CPPTYPE_UINT32):
        return _same
    return lambda value: _PRINTER._FieldToJsonObject(field, value)  # bytes, float, double


def _same(value: Any) -> Any:
    return value
