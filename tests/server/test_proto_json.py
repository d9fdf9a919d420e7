"""``node.server.proto_json`` gives json_format's JSON and messages exactly, or its error.

Every message type of ``a2a.proto`` (and the well-known types, and three proto2 types for the
kinds ``a2a.proto`` lacks) is filled at random many times —
every field kind: strings with non-ASCII text, bytes, bools, int32 and int64 at their limits,
doubles including NaN and infinities, enums with unknown numbers, maps, repeated and nested
messages, ``Struct``/``Value`` trees with non-finite numbers, timestamps — and both encoders'
output is compared as JSON text (so ``2`` and ``2.0``, ``1`` and ``true`` differ), or both must
raise the same error.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from a2a.types import a2a_pb2
from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    struct_pb2,
    timestamp_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from node.server.proto_json import message_to_dict, parse_dict

F = FieldDescriptor
TEXT = ["", "a", "calculate", "ü ß 漢字 🙂", '"quoted"\\', "x" * 50, "\x00\x1f"]
DOUBLES = [0.0, -0.0, 1.0, 2.5, -3.25, 1e300, 5e-324, 0.1 + 0.2, float("inf"), float("nan")]
INT64 = [0, 1, -1, 2**53 + 1, 2**63 - 1, -(2**63)]
INT32 = [0, 1, -1, 2**31 - 1, -(2**31)]
WELL_KNOWN = [
    struct_pb2.Struct,
    struct_pb2.Value,
    struct_pb2.ListValue,
    timestamp_pb2.Timestamp,
    duration_pb2.Duration,
    field_mask_pb2.FieldMask,
    wrappers_pb2.DoubleValue,
    wrappers_pb2.StringValue,
    wrappers_pb2.Int64Value,
    wrappers_pb2.BoolValue,
    wrappers_pb2.BytesValue,
    empty_pb2.Empty,
    any_pb2.Any,
    # proto2, for the kinds a2a.proto lacks: int64, uint64, closed enums, repeated int32
    descriptor_pb2.UninterpretedOption,
    descriptor_pb2.FieldDescriptorProto,
    descriptor_pb2.SourceCodeInfo,
]


def _json_value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([*DOUBLES[:8], 7, -2]) if rng.random() > 0.03 else rng.choice(DOUBLES[8:])
    if kind == 3:
        return rng.choice(TEXT)
    if kind in (4, 5):
        return {rng.choice(TEXT): _json_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _set_value(value: struct_pb2.Value, data: Any) -> None:
    if data is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, int | float):
        value.number_value = data
    elif isinstance(data, str):
        value.string_value = data
    elif isinstance(data, dict):
        value.struct_value.update(data) if data else value.struct_value.SetInParent()
    else:
        value.list_value.extend(data) if data else value.list_value.SetInParent()


def _fill(message: Message, rng: random.Random, depth: int = 0) -> Message:
    desc: Descriptor = message.DESCRIPTOR
    if desc.full_name == "google.protobuf.Value":
        if rng.random() > 0.1:  # else: no kind set
            _set_value(message, _json_value(rng, depth))  # type: ignore[arg-type]
        return message
    if desc.full_name == "google.protobuf.Struct":
        data = _json_value(rng, 3)
        for key, item in (data if isinstance(data, dict) else {"k": data}).items():
            _set_value(message.fields[key], item)  # type: ignore[attr-defined]
        return message
    if desc.full_name == "google.protobuf.Timestamp":
        message.seconds = rng.choice([0, 1_700_000_000, 253402300799])  # type: ignore[attr-defined]
        message.nanos = rng.choice([0, 1000, 123456789, 500000000])  # type: ignore[attr-defined]
        return message
    if desc.full_name == "google.protobuf.Duration":
        message.seconds = rng.choice([0, 5, -5, 315576000000])  # type: ignore[attr-defined]
        message.nanos = rng.choice([0, 1000]) * (1 if message.seconds >= 0 else -1)  # type: ignore[attr-defined]
        return message
    if desc.full_name == "google.protobuf.FieldMask":
        message.paths.extend(rng.sample(["a", "b.c", "foo_bar"], rng.randrange(3)))  # type: ignore[attr-defined]
        return message
    if desc.full_name == "google.protobuf.Any":
        if rng.random() < 0.5:
            inner = _fill(a2a_pb2.Part(), rng, depth + 1)
            message.Pack(inner)  # type: ignore[attr-defined]
        return message
    for field in desc.fields:
        if rng.random() < 0.45:
            continue
        if field.containing_oneof is not None and message.WhichOneof(field.containing_oneof.name):
            continue
        _fill_field(message, field, rng, depth)
    return message


def _scalar(field: FieldDescriptor, rng: random.Random) -> Any:
    cpp = field.cpp_type
    if cpp == F.CPPTYPE_STRING:
        return (
            rng.choice([b"", b"\x00\xff bytes", bytes(range(40))])
            if field.type == F.TYPE_BYTES
            else rng.choice(TEXT)
        )
    if cpp == F.CPPTYPE_BOOL:
        return rng.choice([True, False])
    if cpp == F.CPPTYPE_INT64:
        return rng.choice(INT64)
    if cpp == F.CPPTYPE_UINT64:
        return rng.choice([0, 1, 2**53 + 1, 2**64 - 1])
    if cpp == F.CPPTYPE_INT32:
        return rng.choice(INT32)
    if cpp == F.CPPTYPE_DOUBLE or cpp == F.CPPTYPE_FLOAT:
        return rng.choice(DOUBLES)
    if cpp == F.CPPTYPE_ENUM:
        numbers = list(field.enum_type.values_by_number)
        return rng.choice([*numbers, 99]) if not field.enum_type.is_closed else rng.choice(numbers)
    raise AssertionError(f"unplanned field kind {cpp}")


def _fill_field(message: Message, field: FieldDescriptor, rng: random.Random, depth: int) -> None:
    target = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        for _ in range(rng.randrange(3)):
            key = rng.choice(TEXT)
            if value_field.message_type is not None:
                _fill(target[key], rng, depth + 1)
            else:
                target[key] = _scalar(value_field, rng)
        return
    if field.cpp_type == F.CPPTYPE_MESSAGE:
        if depth > 4:
            return
        if field.is_repeated:
            for _ in range(rng.randrange(3)):
                _fill(target.add(), rng, depth + 1)
        else:
            target.SetInParent()
            _fill(target, rng, depth + 1)
        return
    if field.is_repeated:
        target.extend(_scalar(field, rng) for _ in range(rng.randrange(3)))
    else:
        setattr(message, field.name, _scalar(field, rng))


def _outcome(encode: Any, message: Message) -> str:
    try:
        return json.dumps(encode(message), ensure_ascii=False)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


TYPES = [GetMessageClass(d) for d in a2a_pb2.DESCRIPTOR.message_types_by_name.values()]


@pytest.mark.parametrize("cls", [*TYPES, *WELL_KNOWN], ids=lambda c: c.DESCRIPTOR.name)
def test_random_messages_encode_as_json_format_does(cls: type[Message]) -> None:
    rng = random.Random(cls.DESCRIPTOR.full_name)
    errors = 0
    for _ in range(150):
        message = _fill(cls(), rng)
        expected = _outcome(MessageToDict, message)
        assert _outcome(message_to_dict, message) == expected, message
        errors += not expected.startswith(("{", "[", '"', "n", "t", "f", "-", "0", "1"))
    assert errors < 150  # most cases encode (the error path is compared too)


def test_the_options_the_dispatcher_passes_and_any_other() -> None:
    task = a2a_pb2.Task(id="t", context_id="c")
    task.status.state = a2a_pb2.TaskState.TASK_STATE_COMPLETED
    task.metadata["n"] = 2.0
    assert message_to_dict(task, preserving_proto_field_name=False) == MessageToDict(task)
    for options in ({"preserving_proto_field_name": True}, {"use_integers_for_enums": True}):
        assert message_to_dict(task, **options) == MessageToDict(task, **options)
    assert json.dumps(message_to_dict(task)) == json.dumps(MessageToDict(task))


# -- parse_dict: ParseDict's message, or its error ------------------------------------------------


def _parsed(parse: Any, cls: type[Message], data: Any, **options: Any) -> str:
    """The message's deterministic bytes (and which fields are set), or the error."""
    try:
        message = parse(data, cls(), **options)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    fields = [field.name for field, _ in message.ListFields()]
    return f"{fields} {message.SerializePartialToString(deterministic=True)!r}"


@pytest.mark.parametrize("cls", [*TYPES, *WELL_KNOWN], ids=lambda c: c.DESCRIPTOR.name)
def test_random_messages_parse_as_json_format_does(cls: type[Message]) -> None:
    rng = random.Random("parse " + cls.DESCRIPTOR.full_name)
    for _ in range(150):
        try:
            data = MessageToDict(_fill(cls(), rng))
        except Exception:  # a message JSON cannot hold (NaN in a Value): nothing to parse
            continue
        for options in ({}, {"ignore_unknown_fields": True}):
            expected = _parsed(ParseDict, cls, data, **options)
            assert _parsed(parse_dict, cls, data, **options) == expected, data


SEND = {
    "message": {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"data": {"skill": "calculate", "arguments": {"expression": "1+1"}}}],
    }
}
ODD_SENDS: list[Any] = [
    SEND,
    {**SEND, "tenant": "t", "metadata": {"a": [1, 2.5, None, True, {"b": {}}], "c": []}},
    {"message": {**SEND["message"], "unknownKey": 1}},  # ignored, or refused
    {"message": {**SEND["message"], "message_id": "m-2"}},  # a field twice, both spellings
    {"message": {**SEND["message"], "parts": [{"text": "a", "data": 1}]}},  # two oneof members
    {"message": {**SEND["message"], "parts": [{"text": "a", "data": None}]}},
    {"message": {**SEND["message"], "parts": [None]}},
    {"message": {**SEND["message"], "parts": {"text": "a"}}},  # not a list
    {"message": {**SEND["message"], "role": 1}},  # enum by number
    {"message": {**SEND["message"], "role": "ROLE_NOPE"}},  # unknown enum name
    {"message": {**SEND["message"], "messageId": 5}},
    {"message": {**SEND["message"], "messageId": "\ud800x"}},  # unpaired surrogate
    {"message": {**SEND["message"], "messageId": None}},
    {"message": {**SEND["message"], "referenceTaskIds": ["a", "b"]}},
    {"message": {**SEND["message"], "referenceTaskIds": ["a", 1]}},
    {"message": {**SEND["message"], "extensions": "x"}},
    {"message": {**SEND["message"], "parts": [{"raw": "aGk="}, {"url": "u", "mediaType": "t"}]}},
    {"message": {**SEND["message"], "parts": [{"data": 10**400}]}},  # too big for a double
    {"message": {**SEND["message"], "parts": [{"data": float("nan")}]}},
    {"configuration": {"historyLength": 3, "returnImmediately": True}, **SEND},
    {"configuration": {"historyLength": "3"}, **SEND},  # an integer as a string
    {"configuration": {"historyLength": 2**40}, **SEND},  # out of int32's range
    {"configuration": {"returnImmediately": "true"}, **SEND},
    {"configuration": {"acceptedOutputModes": ["text/plain"]}, **SEND},
    {"metadata": "not an object", **SEND},
    {"metadata": None, **SEND},
    {"message": [], "extra": 1},
    [SEND],
    "text",
    None,
]


def _deep(levels: int) -> dict[str, Any]:
    data: dict[str, Any] = {}
    inner = data
    for _ in range(levels):
        inner["k"] = {}
        inner = inner["k"]
    return {**SEND, "metadata": data}


@pytest.mark.parametrize("data", [*ODD_SENDS, _deep(40), _deep(49), _deep(50), _deep(120)])
def test_odd_requests_parse_as_json_format_does(data: Any) -> None:
    for options in ({}, {"ignore_unknown_fields": True}):
        expected = _parsed(ParseDict, a2a_pb2.SendMessageRequest, data, **options)
        assert _parsed(parse_dict, a2a_pb2.SendMessageRequest, data, **options) == expected


def test_a_message_with_fields_already_is_merged_by_json_format() -> None:
    ours, theirs = a2a_pb2.SendMessageRequest(tenant="x"), a2a_pb2.SendMessageRequest(tenant="x")
    assert parse_dict(SEND, ours) == ParseDict(SEND, theirs)
    assert ours.tenant == "x"
    options = {"max_recursion_depth": 3}
    assert _parsed(parse_dict, a2a_pb2.SendMessageRequest, SEND, **options) == _parsed(
        ParseDict, a2a_pb2.SendMessageRequest, SEND, **options
    )


def test_plain_requests_are_filled_without_json_format(monkeypatch: pytest.MonkeyPatch) -> None:
    from node.server import proto_json

    def refuse(*args: Any, **kwargs: Any) -> Message:
        raise AssertionError("handed to json_format")

    monkeypatch.setattr(proto_json, "_ORIGINAL_PARSE", refuse)
    plain = [SEND, ODD_SENDS[1], ODD_SENDS[13], ODD_SENDS[19], ODD_SENDS[23], _deep(40)]
    for data in plain:
        assert parse_dict(data, a2a_pb2.SendMessageRequest()) == ParseDict(
            data, a2a_pb2.SendMessageRequest()
        )
    with pytest.raises(AssertionError, match="json_format"):
        parse_dict(ODD_SENDS[2], a2a_pb2.SendMessageRequest(), ignore_unknown_fields=True)


def test_a_type_that_holds_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    from node.server import proto_json

    data = {"name": "a", "nestedType": [{"name": "b", "nestedType": [{"name": "c"}]}]}
    expected = _parsed(ParseDict, descriptor_pb2.DescriptorProto, data)
    assert "nested_type" in expected
    monkeypatch.setattr(proto_json, "_ORIGINAL_PARSE", None)  # planned, not handed over
    assert _parsed(parse_dict, descriptor_pb2.DescriptorProto, data) == expected
