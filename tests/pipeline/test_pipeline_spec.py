from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from node.pipeline import PipelineSpec

CARD_YAML = """
id: page_keywords
description: Fetch a web page and extract its keywords.
input_schema:
  type: object
  properties:
    url: {type: string}
    top: {type: integer, default: 5}
  required: [url]
steps:
  - id: fetch
    tool: web__http_fetch
    arguments: {url: $input/url}
  - id: keywords
    tool: text__keywords
    arguments: {text: $steps/fetch/text, top: $input/top}
    on_error: stop
    timeout: 20
output: [keywords]
timeout: 120
"""


def spec(steps: list[dict[str, Any]], **extra: Any) -> PipelineSpec:
    return PipelineSpec.model_validate({"id": "p", "description": "d", "steps": steps, **extra})


def error_of(steps: list[dict[str, Any]], **extra: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        spec(steps, **extra)
    return str(caught.value)


def test_the_documented_yaml_shape_loads() -> None:
    loaded = PipelineSpec.model_validate(yaml.safe_load(CARD_YAML))
    assert [s.id for s in loaded.steps] == ["fetch", "keywords"]
    assert loaded.steps[1].dependencies() == ("fetch",)
    assert loaded.output_steps() == ("keywords",)
    assert loaded.scope == "public"


def test_defaults() -> None:
    loaded = spec([{"id": "a", "tool": "t"}])
    assert loaded.input_schema == {"type": "object", "properties": {}}
    assert loaded.timeout == 120
    assert loaded.steps[0].on_error == "stop"
    assert loaded.steps[0].timeout is None


def test_default_output_is_the_steps_nothing_depends_on() -> None:
    loaded = spec(
        [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t", "arguments": {"x": "$steps/a"}},
            {"id": "c", "tool": "t", "after": ["a"]},
        ]
    )
    assert loaded.output_steps() == ("b", "c")


def test_dependencies_are_references_plus_after() -> None:
    loaded = spec(
        [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t"},
            {"id": "c", "tool": "t", "arguments": {"x": ["$steps/b/y", "$input"]}, "after": ["a"]},
        ]
    )
    assert loaded.steps[2].dependencies() == ("b", "a")


def test_a_reference_to_a_later_step_is_fine() -> None:
    loaded = spec(
        [{"id": "b", "tool": "t", "arguments": {"x": "$steps/a"}}, {"id": "a", "tool": "t"}]
    )
    assert loaded.output_steps() == ("b",)


def test_duplicate_step_ids_are_refused() -> None:
    message = error_of([{"id": "a", "tool": "t"}, {"id": "a", "tool": "u"}])
    assert "duplicate step ids: a" in message


def test_unknown_step_reference_is_refused() -> None:
    message = error_of([{"id": "a", "tool": "t", "arguments": {"x": {"y": "$steps/zz/out"}}}])
    assert "step 'a' refers to unknown step 'zz' (steps: a)" in message


def test_unknown_after_is_refused() -> None:
    assert "refers to unknown step 'zz'" in error_of([{"id": "a", "tool": "t", "after": ["zz"]}])


def test_cycles_are_refused_with_their_path() -> None:
    message = error_of(
        [
            {"id": "a", "tool": "t", "arguments": {"x": "$steps/c"}},
            {"id": "b", "tool": "t", "arguments": {"x": "$steps/a"}},
            {"id": "c", "tool": "t", "after": ["b"]},
        ]
    )
    assert "steps depend on each other: a → c → b → a" in message


def test_a_step_referring_to_itself_is_a_cycle() -> None:
    assert "a → a" in error_of([{"id": "a", "tool": "t", "arguments": {"x": "$steps/a"}}])


def test_bad_pointer_is_refused_with_the_step_path() -> None:
    message = error_of([{"id": "a", "tool": "t", "arguments": {"x": "$input/a~2"}}])
    assert "steps.0.arguments" in message
    assert "'~' must be followed by 0 or 1" in message


def test_unknown_dollar_form_is_refused() -> None:
    assert "is not a reference" in error_of([{"id": "a", "tool": "t", "arguments": {"x": "$in"}}])


def test_unknown_output_step_is_refused() -> None:
    assert "output names unknown step 'zz'" in error_of([{"id": "a", "tool": "t"}], output=["zz"])


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"input_schema": {"type": "array"}}, "type: object"),
        ({"input_schema": {"type": "object", "properties": {"x": {"$ref": "http://x"}}}}, "$ref"),
        ({"id": "bad name"}, "id"),
        ({"surprise": 1}, "Extra inputs are not permitted"),
        ({"scope": "secret"}, "scope"),
        ({"timeout": 0}, "timeout"),
        ({"output": []}, "output"),
    ],
)
def test_pipeline_fields_are_checked(extra: dict[str, Any], fragment: str) -> None:
    assert fragment in error_of([{"id": "a", "tool": "t"}], **extra)


def test_steps_are_required_and_strict() -> None:
    assert "steps" in error_of([])
    assert "Extra inputs" in error_of([{"id": "a", "tool": "t", "args": {}}])
    assert "on_error" in error_of([{"id": "a", "tool": "t", "on_error": "ignore"}])
    assert "tool" in error_of([{"id": "a", "tool": "no spaces"}])


def test_specs_are_frozen() -> None:
    loaded = spec([{"id": "a", "tool": "t"}])
    with pytest.raises(ValidationError):
        loaded.id = "q"  # type: ignore[misc]
