"""Parsing provider responses: what servers send beyond the happy path."""

from __future__ import annotations

import pytest

from node.planning.providers import ProviderError
from node.planning.providers.anthropic import parse_response as parse_anthropic
from node.planning.providers.openai import parse_response as parse_openai


def test_openai_response_without_ids_gets_generated_ids_and_parts_are_joined():
    turn = parse_openai(
        {
            "choices": [
                {
                    "message": {
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                        "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1}}}],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    assert turn.text == "ab"
    assert turn.tool_calls[0].id
    assert turn.tool_calls[0].arguments == {"a": 1}
    assert (turn.usage.input_tokens, turn.stop_reason) == (0, "tool_calls")


def test_anthropic_usage_counts_cached_input_tokens():
    turn = parse_anthropic(
        {
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": 3,
                "cache_creation_input_tokens": 4,
                "cache_read_input_tokens": 5,
                "output_tokens": 7,
            },
        }
    )
    assert (turn.text, turn.usage.input_tokens, turn.usage.output_tokens) == ("a\nb", 12, 7)
    assert turn.tool_calls == []


@pytest.mark.parametrize(
    "body",
    [
        {"choices": [{"message": {"content": 5}}]},
        {"choices": [{"message": {"tool_calls": [{"function": "add"}]}}]},
        {"choices": [{"message": {"tool_calls": {"id": "x"}}}]},
        {"choices": [{"text": "legacy completion"}]},
    ],
)
def test_openai_shapes_that_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ProviderError, match="malformed model response"):
        parse_openai(body)


def test_anthropic_unknown_blocks_are_ignored_and_bad_ids_replaced() -> None:
    turn = parse_anthropic(
        {
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "tool_use", "id": 7, "name": "add", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
        }
    )
    assert turn.text == ""
    [call] = turn.tool_calls
    assert (call.name, call.arguments, turn.stop_reason) == ("add", {"a": 1}, "tool_use")
    assert isinstance(call.id, str) and call.id
