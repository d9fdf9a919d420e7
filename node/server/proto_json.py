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

:func:`parse_dict` is the other way (``ParseDict``, what the JSON-RPC dispatcher parses every
request's params with): a plan per message type maps each JSON key (``json_name`` and the proto
name) to its field. It fills a new message from the plain shapes — strings (checked for unpaired
surrogates as json_format does), bools, integers, enum names, nested and repeated messages,
repeated strings, ``Struct``/``Value``/``ListValue`` trees — and hands anything else to
json_format itself, from scratch, so every error and every unusual input (``null``, a key it
does not know, a field given twice, two members of a oneof, numbers as strings, enum numbers,
bytes, floats, maps, other well-known types, a message already holding fields, other options) is
json_format's own. ``tests/server/test_proto_json.py`` compares both over random messages and
over those inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

__all__ = ["message_to_dict", "parse_dict"]

Convert = Callable[[Any], Any]
_F = FieldDescriptor
_PRINTER = json_format._Printer()  # the default options: the one whose rules are planned here
_ORIGINAL = json_format.MessageToDict
_ORIGINAL_PARSE = json_format.ParseDict
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


# -- parsing: ParseDict -------------------------------------------------------------------------


class _Declined(Exception):
    """The input is not one of the shapes :func:`parse_dict` fills itself."""


_MAX_DEPTH = 90  # json_format refuses 100 nested messages; deeper input goes to it
_SURROGATE = json_format._UNPAIRED_SURROGATE_PATTERN
# a plan entry: (field name, oneof name or None, kind, enum names or message plan key)
_Entry = tuple[str, str | None, int, Any]
_STR, _BOOL, _INT, _ENUM, _MSG, _REP_STR, _REP_MSG, _VALUE, _STRUCT, _LIST = range(10)
_plans: dict[Descriptor, dict[str, _Entry] | None] = {}
_WKT_FIELDS = {
    "google.protobuf.Value": _VALUE,
    "google.protobuf.Struct": _STRUCT,
    "google.protobuf.ListValue": _LIST,
}


def parse_dict(
    js_dict: Any, message: Message, ignore_unknown_fields: bool = False, **options: Any
) -> Message:
    """``json_format.ParseDict(js_dict, message, ...)``, faster for plain requests."""
    if not options and type(js_dict) is dict and not message.ListFields():
        try:
            _fill(message, js_dict, 1)
            return message
        except Exception:  # json_format decides, from an empty message
            message.Clear()
    return _ORIGINAL_PARSE(js_dict, message, ignore_unknown_fields, **options)


def _plan(desc: Descriptor) -> dict[str, _Entry] | None:
    """Key -> entry for a regular message; None for a type json_format treats specially."""
    if desc in _plans:
        return _plans[desc]
    if (
        desc.full_name in json_format._WKTJSONMETHODS
        or desc.file.name == "google/protobuf/wrappers.proto"
    ):
        _plans[desc] = None
        return None
    plan: dict[str, _Entry] = {}
    _plans[desc] = plan  # before its fields: a type may hold itself
    oneofs = {oneof.name for oneof in desc.oneofs}
    for field in desc.fields:
        entry = _field_entry(field)
        if entry is None or field.name in oneofs or field.json_name in oneofs:
            continue  # json_format's own rules (or its odd name clash) apply
        plan[field.json_name] = plan[field.name] = entry
    return plan


def _field_entry(field: FieldDescriptor) -> _Entry | None:
    oneof = field.containing_oneof.name if field.containing_oneof is not None else None
    cpp = field.cpp_type
    if json_format._IsMapEntry(field) or field.is_extension:
        return None
    if cpp == _F.CPPTYPE_MESSAGE:
        full_name = field.message_type.full_name
        kind = _WKT_FIELDS.get(full_name)
        if field.is_repeated:
            return None if kind is not None else (field.name, oneof, _REP_MSG, None)
        if kind is None and _plan(field.message_type) is None:
            return None  # Timestamp, Any, wrappers ...
        return field.name, oneof, _MSG if kind is None else kind, None
    if field.is_repeated:
        if cpp == _F.CPPTYPE_STRING and field.type != _F.TYPE_BYTES:
            return field.name, oneof, _REP_STR, None
        return None
    if cpp == _F.CPPTYPE_STRING and field.type != _F.TYPE_BYTES:
        return field.name, oneof, _STR, None
    if cpp == _F.CPPTYPE_BOOL:
        return field.name, oneof, _BOOL, None
    if cpp in (_F.CPPTYPE_INT32, _F.CPPTYPE_INT64, _F.CPPTYPE_UINT32, _F.CPPTYPE_UINT64):
        return field.name, oneof, _INT, None
    if cpp == _F.CPPTYPE_ENUM and field.enum_type.full_name != "google.protobuf.NullValue":
        names = {value.name: value.number for value in field.enum_type.values}
        return field.name, oneof, _ENUM, names
    return None  # bytes, float, double


def _fill(message: Any, js: Any, depth: int) -> None:
    plan = _plan(message.DESCRIPTOR)
    if plan is None or type(js) is not dict or depth > _MAX_DEPTH:
        raise _Declined
    seen: set[str] = set()
    for key, value in js.items():
        entry = plan.get(key)
        if entry is None or value is None:
            raise _Declined
        name, oneof, kind, extra = entry
        if name in seen or (oneof is not None and oneof in seen):
            raise _Declined
        seen.add(name)
        if oneof is not None:
            seen.add(oneof)
        if kind == _STR:
            if type(value) is not str or _SURROGATE.search(value):
                raise _Declined
            setattr(message, name, value)
        elif kind == _MSG:
            sub = getattr(message, name)
            sub.SetInParent()
            _fill(sub, value, depth + 1)
        elif kind == _ENUM:
            if type(value) is not str or value not in extra:
                raise _Declined
            setattr(message, name, extra[value])
        elif kind == _REP_MSG:
            if type(value) is not list:
                raise _Declined
            items = getattr(message, name)
            for item in value:
                _fill(items.add(), item, depth + 1)
        elif kind == _VALUE:
            sub = getattr(message, name)
            sub.SetInParent()
            _value_from(sub, value, depth + 1)
        elif kind == _STRUCT:
            sub = getattr(message, name)
            sub.SetInParent()
            _struct_from(sub, value, depth + 1)
        elif kind == _LIST:
            sub = getattr(message, name)
            sub.SetInParent()
            _list_from(sub, value, depth + 1)
        elif kind == _BOOL:
            if type(value) is not bool:
                raise _Declined
            setattr(message, name, value)
        elif kind == _INT:
            if type(value) is not int:
                raise _Declined
            setattr(message, name, value)
        else:  # _REP_STR
            if type(value) is not list:
                raise _Declined
            for item in value:
                if type(item) is not str or _SURROGATE.search(item):
                    raise _Declined
            getattr(message, name).extend(value)


def _value_from(message: Any, value: Any, depth: int) -> None:
    """json_format's ``_ConvertValueMessage`` (the same order of checks)."""
    if depth > _MAX_DEPTH:
        raise _Declined
    if isinstance(value, dict):
        _struct_from(message.struct_value, value, depth + 1)
    elif isinstance(value, list | tuple):
        _list_from(message.list_value, value, depth + 1)
    elif value is None:
        message.null_value = 0
    elif isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, int | float):
        message.number_value = value
    else:
        raise _Declined


def _struct_from(message: Any, value: Any, depth: int) -> None:
    if type(value) is not dict or depth > _MAX_DEPTH:
        raise _Declined
    message.Clear()  # as json_format: an empty object still sets the field
    fields = message.fields
    for key in value:
        _value_from(fields[key], value[key], depth + 1)


def _list_from(message: Any, value: Any, depth: int) -> None:
    if type(value) is not list or depth > _MAX_DEPTH:
        raise _Declined
    message.ClearField("values")
    values = message.values
    for item in value:
        _value_from(values.add(), item, depth + 1)
