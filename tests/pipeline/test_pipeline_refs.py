from __future__ import annotations

from typing import Any

import pytest

from node.errors import ToolError
from node.pipeline.refs import Ref, compile_arguments, parse_pointer, references, resolve

INPUT: dict[str, Any] = {
    "q": "cats",
    "n": 3,
    "flag": False,
    "opts": {"a/b": 1, "m~n": 2},
    "list": [10, 20],
}
STEPS: dict[str, Any] = {"fetch": {"items": [{"url": "u0"}, {"url": "u1"}], "total": 2.5}}


def run(arguments: Any) -> Any:
    return resolve(compile_arguments(arguments), input=INPUT, steps=STEPS, step="s")


def test_references_keep_the_type_of_the_value() -> None:
    got = run(
        {"n": "$input/n", "flag": "$input/flag", "opts": "$input/opts", "t": "$steps/fetch/total"}
    )
    assert got == {"n": 3, "flag": False, "opts": INPUT["opts"], "t": 2.5}


def test_whole_input_and_whole_step_output() -> None:
    assert run({"all": "$input", "f": "$steps/fetch"}) == {"all": INPUT, "f": STEPS["fetch"]}


def test_references_resolve_inside_nested_dicts_and_lists() -> None:
    got = run({"body": {"query": ["$input/q", {"deep": "$steps/fetch/items/1/url"}], "k": 7}})
    assert got == {"body": {"query": ["cats", {"deep": "u1"}], "k": 7}}


def test_pointer_escapes_and_array_indices() -> None:
    assert run({"x": "$input/opts/a~1b", "y": "$input/opts/m~0n", "z": "$input/list/1"}) == {
        "x": 1,
        "y": 2,
        "z": 20,
    }
    assert parse_pointer("/a~1b/~0/0") == ("a/b", "~", "0")
    assert parse_pointer("") == ()


def test_double_dollar_is_a_literal_and_plain_strings_are_left_alone() -> None:
    got = run({"price": "$$5", "ref": "$$input/q", "text": "costs $5", "plain": "input"})
    assert got == {"price": "$5", "ref": "$input/q", "text": "costs $5", "plain": "input"}


def test_resolved_values_are_copies() -> None:
    got = run({"opts": "$input/opts"})
    got["opts"]["new"] = 1
    assert "new" not in INPUT["opts"]


@pytest.mark.parametrize(
    ("argument", "fragment"),
    [
        ("$input/missing", "no member 'missing' at /"),
        ("$input/list/5", "index 5 out of range at /list (length 2)"),
        ("$input/list/01", "'01' is not an array index"),
        ("$input/list/-", "'-' is not an array index"),
        ("$input/q/x", "cannot look up 'x' in a string at /q"),
        ("$steps/fetch/items/0/nope", "no member 'nope' at /items/0"),
    ],
)
def test_missing_path_names_the_step_and_the_reference(argument: str, fragment: str) -> None:
    with pytest.raises(ToolError) as caught:
        run({"x": argument})
    message = str(caught.value)
    assert message.startswith(f"step 's': {argument!r} has no value: ")
    assert fragment in message


def test_a_step_without_a_result_is_an_error() -> None:
    with pytest.raises(ToolError, match="step 'other' has no result"):
        run({"x": "$steps/other/a"})


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("$inputs/q", "is not a reference"),
        ("$q", "is not a reference"),
        ("$steps", "is not a reference"),
        ("$steps/", "is not a step id"),
        ("$steps/a b/x", "is not a step id"),
        ("$input/a~2b", "'~' must be followed by 0 or 1"),
        ("$input/trailing~", "'~' must be followed by 0 or 1"),
        ({"$ref": "/input/q"}, "not references here"),
    ],
)
def test_malformed_references_are_refused(value: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        compile_arguments({"nested": [value]})


def test_references_lists_every_reference() -> None:
    template = compile_arguments({"a": "$input/q", "b": [{"c": "$steps/x/y"}], "d": "$$steps/z"})
    assert list(references(template)) == [
        Ref("$input/q", None, ("q",)),
        Ref("$steps/x/y", "x", ("y",)),
    ]
