from __future__ import annotations

from typing import Any

import pytest

from node.errors import ConfigError, InvalidArguments
from node.tooling.schema import compile_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 10, "pattern": "^[a-z]+$"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "verbose": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "counts": {"type": "array", "items": {"type": "integer"}},
        "maybe": {"type": ["integer", "null"]},
        "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "options": {"$ref": "#/$defs/Options"},
        "optional": {"anyOf": [{"$ref": "#/$defs/Options"}, {"type": "null"}]},
        "level": {"enum": [1, 2, 3]},
        "kind": {"const": "x"},
        "text_or_number": {"type": ["string", "integer"]},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "Mode": {"type": "string", "enum": ["fast", "slow", "exact"]},
        "Options": {
            "type": "object",
            "properties": {
                "mode": {"$ref": "#/$defs/Mode"},
                "depth": {"type": "integer", "minimum": 0, "maximum": 5},
            },
            "required": ["mode"],
            "additionalProperties": False,
        },
    },
}
compiled = compile_schema(SCHEMA)


def cast(value: Any, key: str = "x") -> Any:
    return compiled.cast({key: value})[key]


def error(arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidArguments) as info:
        compiled.validate(arguments)
    return str(info.value)


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("limit", "5", 5),
        ("limit", " -7 ", -7),
        ("limit", 5.0, 5),
        ("threshold", "0.5", 0.5),
        ("threshold", "1e-3", 0.001),
        ("threshold", "2", 2),
        ("verbose", "true", True),
        ("verbose", "FALSE", False),
        ("verbose", "Yes", True),
        ("verbose", "no", False),
        ("verbose", "1", True),
        ("verbose", "0", False),
        ("query", 5, "5"),
        ("query", 0.5, "0.5"),
        ("counts", ["1", 2], [1, 2]),
        ("maybe", "3", 3),
        ("either", "3", 3),
        ("level", "2", 2),
    ],
)
def test_safe_scalars_are_cast(key: str, raw: Any, expected: Any) -> None:
    result = cast(raw, key)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("limit", True),  # never bool → int
        ("query", False),  # never bool → string
        ("tags", "a"),  # never scalar → array
        ("limit", "5.5"),
        ("limit", 5.5),
        ("limit", "five"),
        ("threshold", "nan"),
        ("threshold", "1e999"),
        ("threshold", "1_0"),
        ("verbose", "maybe"),
        ("verbose", 1),
        ("query", None),
        ("query", [1]),
        ("text_or_number", "5"),  # a string is already valid
        ("level", "two"),
    ],
)
def test_unsafe_or_impossible_casts_leave_the_value(key: str, raw: Any) -> None:
    assert cast(raw, key) is raw


def test_casting_nested_objects_through_refs() -> None:
    arguments = {
        "query": "a",
        "options": {"mode": "fast", "depth": "3"},
        "optional": {"depth": "2"},
    }
    result = compiled.cast(arguments)
    assert result == {
        "query": "a",
        "options": {"mode": "fast", "depth": 3},
        "optional": {"depth": 2},
    }
    assert arguments["options"] == {"mode": "fast", "depth": "3"}  # the input is never mutated


def test_nothing_to_cast_returns_the_same_dict() -> None:
    arguments = {"query": "a", "limit": 5, "tags": ["x"], "options": {"mode": "fast"}}
    assert compiled.cast(arguments) is arguments


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "query is required"),
        ({"query": ""}, "query must be at least 1 character"),
        ({"query": "abcdefghijk"}, "query must be at most 10 characters"),
        ({"query": "A"}, "query must match the pattern ^[a-z]+$"),
        ({"query": 5}, "query must be a string"),
        ({"query": "a", "limit": 0}, "limit must be >= 1"),
        ({"query": "a", "limit": 101}, "limit must be <= 100"),
        ({"query": "a", "limit": True}, "limit must be an integer"),
        ({"query": "a", "threshold": 0}, "threshold must be > 0"),
        ({"query": "a", "tags": ["a", "b", "c"]}, "tags must have at most 2 items"),
        ({"query": "a", "tags": [1]}, "tags[0] must be a string"),
        ({"query": "a", "maybe": "x"}, "maybe must be an integer or null"),
        ({"query": "a", "either": "x"}, "either must be an integer or null"),
        ({"query": "a", "options": {"mode": "fast", "depth": 6}}, "options.depth must be <= 5"),
        ({"query": "a", "options": {"depth": 1}}, "options.mode is required"),
        (
            {"query": "a", "options": {"mode": "quick"}},
            'options.mode must be one of "fast", "slow", "exact"',
        ),
        ({"query": "a", "options": {"mode": "fast", "x": 1}}, "options: unknown property 'x'"),
        ({"query": "a", "optional": {"mode": "slow", "depth": 9}}, "optional.depth must be <= 5"),
        ({"query": "a", "optional": 3}, "optional must be an object or null"),
        ({"query": "a", "level": 4}, "level must be one of 1, 2, 3"),
        ({"query": "a", "kind": "y"}, 'kind must be "x"'),
        ({"query": "a", "surprise": 1}, "unknown argument 'surprise'"),
    ],
)
def test_validation_messages_name_the_path(arguments: dict[str, Any], message: str) -> None:
    assert error(arguments) == message


def test_valid_arguments_pass() -> None:
    compiled.validate({"query": "a", "options": {"mode": "exact", "depth": 0}, "optional": None})


def test_recursive_refs_compile_and_validate() -> None:
    tree = compile_schema(
        {
            "type": "object",
            "properties": {"root": {"$ref": "#/$defs/Node"}},
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                }
            },
        }
    )
    arguments = {"root": {"value": "1", "children": [{"value": 2, "children": [{"value": "3"}]}]}}
    assert tree.cast(arguments) == {
        "root": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}
    }
    with pytest.raises(InvalidArguments, match=r"root.children\[0\].children\[0\].value"):
        tree.validate({"root": {"children": [{"children": [{"value": "x"}]}]}})


def test_remote_refs_are_refused() -> None:
    with pytest.raises(ConfigError, match="local"):
        compile_schema({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x"}}})


def test_invalid_schema_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        compile_schema({"type": "object", "properties": {"a": {"type": "nonsense"}}})


def test_the_compiled_schema_is_a_private_copy() -> None:
    original: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema = compile_schema(original)
    original["properties"]["a"]["type"] = "string"
    assert schema.cast({"a": "1"}) == {"a": 1}


def test_ids_cannot_turn_a_local_ref_into_a_fetch() -> None:
    schema = {
        "$id": "http://127.0.0.1:9/root.json",
        "type": "object",
        "properties": {"a": {"$id": "http://127.0.0.1:9/a.json", "$ref": "#/missing"}},
    }
    with pytest.raises(ConfigError, match="invalid JSON Schema"):
        compile_schema(schema)
