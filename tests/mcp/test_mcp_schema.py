"""MCP tool names and input schemas, made usable by the node (pure functions)."""

from __future__ import annotations

import pytest

from node.errors import ConfigError
from node.mcp.names import mcp_tool_name
from node.mcp.schema import normalise_schema
from node.tooling.schema import compile_schema
from node.tooling.tool import TOOL_NAME_PATTERN


@pytest.mark.parametrize(
    ("server", "tool"),
    [("s", "add"), ("s", "a.b"), ("s", "a_b"), ("s", "x" * 128), ("srv", "weird name/é")],
)
def test_names_are_valid_and_distinct(server, tool):
    name = mcp_tool_name(server, tool)
    assert TOOL_NAME_PATTERN.match(name) and name.startswith(f"mcp_{server}_")
    assert mcp_tool_name("s", "a.b") != mcp_tool_name("s", "a_b")


def test_a_safe_name_is_kept_as_is():
    assert mcp_tool_name("files", "read_file") == "mcp_files_read_file"


def test_definitions_move_into_defs_and_nullable_becomes_a_union():
    schema = normalise_schema(
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {
                "point": {"$ref": "#/definitions/Point", "nullable": True},
                "count": {"type": "integer", "nullable": True},
            },
            "definitions": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        }
    )
    assert schema["type"] == "object" and "$schema" not in schema
    assert schema["properties"]["point"] == {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}
    assert schema["properties"]["count"]["type"] == ["integer", "null"]
    check = compile_schema(schema).check
    assert check({"point": None, "count": None}) == {"point": None, "count": None}
    assert check({"point": {"x": "2"}}) == {"point": {"x": 2}}


def test_an_empty_schema_is_an_object_without_parameters():
    assert normalise_schema(None) == {"type": "object"}


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"a": {"$ref": "https://example.org/schema.json"}}},
        {"properties": {"a": {"$ref": "#/$defs/Missing"}}},
        {"type": "array"},
    ],
)
def test_unusable_schemas_are_config_errors(schema):
    with pytest.raises(ConfigError):
        normalise_schema(schema)
