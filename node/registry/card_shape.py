"""A fast, exact answer to "would ``ParseDict(document, AgentCard(), ignore_unknown_fields=True)``
accept this card?", for the cards it can answer without building the protobuf message.

    shape = fits(document)        # True: ParseDict accepts it; False: ask ParseDict
    value = field(document, "supportedInterfaces", "supported_interfaces")

The plan is compiled once from the ``AgentCard`` descriptor (so it follows the SDK's schema):
for each message, the fields by JSON name and by proto name, their kind, and their oneof.
:func:`fits` walks a document the way ``json_format``'s parser does and says True only when
every field it meets is one whose conversion cannot fail: a string for a string field, a bool
for a bool field, a JSON object for a message, map or ``Struct``, a list of those for a repeated
field. Anything else it does not vouch for (``null``, both spellings of one field, two members of
a oneof, an extension-like ``[name]`` key, a numeric, enum, bytes or well-known-type field) makes
it say False, and the caller parses with ``ParseDict`` as before, which accepts or refuses with
its own message. Documents must come from :mod:`node.registry.safejson` (finite numbers, no lone
surrogates, bounded depth), whose rules cover what ``ParseDict`` checks inside strings and
``Struct`` values. ``tests/registry/test_card_shape.py`` compares both answers on many cards.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from a2a.types import AgentCard
from google.protobuf.descriptor import Descriptor, FieldDescriptor

__all__ = ["field", "fits"]

_STR, _BOOL, _MSG, _STRUCT, _MAP, _OTHER = range(6)


@dataclass(slots=True)
class _Field:
    name: str
    kind: int
    repeated: bool
    oneof: str | None
    message: _Message | None = None  # _MSG, and a _MAP's message values
    values: int = _OTHER  # a _MAP's value kind


@dataclass(slots=True)
class _Message:
    fields: dict[str, _Field] = dataclass_field(default_factory=dict)  # JSON and proto names
    oneofs: frozenset[str] = frozenset()


def _kind(f: FieldDescriptor) -> int:
    if f.type == FieldDescriptor.TYPE_STRING:
        return _STR
    if f.type == FieldDescriptor.TYPE_BOOL:
        return _BOOL
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        name = f.message_type.full_name
        if name == "google.protobuf.Struct":
            return _STRUCT
        if name.startswith("google.protobuf."):
            return _OTHER  # wrappers, Timestamp, Any, ...: ParseDict decides
        if f.message_type.GetOptions().map_entry:
            return _MAP
        return _MSG
    return _OTHER  # numbers, enums, bytes: ParseDict decides


def _compile(d: Descriptor, plans: dict[str, _Message]) -> _Message:
    if (plan := plans.get(d.full_name)) is not None:
        return plan
    plan = plans[d.full_name] = _Message(oneofs=frozenset(o.name for o in d.oneofs))
    for f in d.fields:
        kind = _kind(f)
        entry = _Field(
            f.name, kind, f.is_repeated and kind != _MAP, getattr(f.containing_oneof, "name", None)
        )
        if kind == _MSG:
            entry.message = _compile(f.message_type, plans)
        elif kind == _MAP:
            value = f.message_type.fields_by_name["value"]
            entry.values = _kind(value)
            if f.message_type.fields_by_name["key"].type != FieldDescriptor.TYPE_STRING:
                entry.kind = _OTHER
            elif entry.values == _MSG:
                entry.message = _compile(value.message_type, plans)
        plan.fields[f.json_name] = entry
        plan.fields.setdefault(f.name, entry)
    return plan


_CARD = _compile(AgentCard.DESCRIPTOR, {})


def fits(document: object) -> bool:
    """True when ``ParseDict`` surely accepts ``document`` as an ``AgentCard`` (see above)."""
    return _message(_CARD, document)


def field(document: dict[str, Any], json_name: str, name: str, default: Any = "") -> Any:
    """The value of a field of a document :func:`fits` accepted (spelt either way)."""
    value = document.get(json_name)
    if value is None:
        value = document.get(name, default)
    return value


def _message(plan: _Message, value: object) -> bool:
    if type(value) is not dict:
        return False
    seen: set[str] = set()  # field names and oneof names met, as ParseDict's ``names``
    for key, item in value.items():
        f = plan.fields.get(key)
        if f is None:
            if key.startswith("["):
                return False  # an extension name: ParseDict refuses it
            continue  # unknown: ignored
        if item is None or key in seen or f.name in seen or f.oneof in seen:
            return False
        seen.add(key)
        seen.add(f.name)
        if f.oneof is not None:
            seen.add(f.oneof)
        if f.repeated:
            if type(item) is not list or not all(_value(f.kind, f.message, x) for x in item):
                return False
        elif f.kind == _MAP:
            if type(item) is not dict or not all(
                _value(f.values, f.message, x) for x in item.values()
            ):
                return False
        elif not _value(f.kind, f.message, item):
            return False
    return True


def _value(kind: int, message: _Message | None, value: object) -> bool:
    if kind == _STR:
        return type(value) is str
    if kind == _BOOL:
        return type(value) is bool
    if kind == _MSG:
        assert message is not None
        return _message(message, value)
    if kind == _STRUCT:
        return type(value) is dict  # any safejson value converts to a protobuf Value
    return False
