from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fastjsonschema import JsonSchemaValueException

from tools.text import keywords, split_sentences, summarize, terms, text_stats

Call = Callable[..., Awaitable[Any]]
ARTICLE = """Solar power is growing fast. Solar panels turn sunlight into power for homes.
The weather was nice on Tuesday. Cheap solar panels make solar power popular.

My cat likes boxes. Storage batteries keep solar power for the night."""


def test_split_sentences_keeps_abbreviations_and_blank_lines() -> None:
    text = 'Dr. Smith came, e.g. on Monday. Was it "late"? Yes!\n\nNew part\nwrapped line.'
    assert split_sentences(text) == [
        "Dr. Smith came, e.g. on Monday.",
        'Was it "late"?',
        "Yes!",
        "New part wrapped line.",
    ]
    assert split_sentences("   ") == []


def test_terms_drop_stop_words_numbers_and_case() -> None:
    assert terms("The Cat and THE cat's 42 toys, don't I?") == ["cat", "cat's", "toys"]


async def test_text_stats(call: Call) -> None:
    stats = await call(text_stats, text="The cat sat.\nThe cat ran away!", top=2)
    assert stats == {
        "words": 7,
        "characters": 30,
        "lines": 2,
        "sentences": 2,
        "average_word_length": 3.14,
        "top_terms": [{"term": "cat", "count": 2}, {"term": "sat", "count": 1}],
    }


async def test_text_stats_of_empty_text(call: Call) -> None:
    assert await call(text_stats, text="") == {
        "words": 0,
        "characters": 0,
        "lines": 0,
        "sentences": 0,
        "average_word_length": 0.0,
        "top_terms": [],
    }


async def test_keywords_most_frequent_first(call: Call) -> None:
    found = await call(keywords, text=ARTICLE, top=3)
    assert found == [
        {"term": "solar", "count": 5},
        {"term": "power", "count": 4},
        {"term": "panels", "count": 2},
    ]
    assert await call(keywords, text="the and of") == []


async def test_summarize_keeps_the_best_sentences_in_order(call: Call) -> None:
    summary = await call(summarize, text=ARTICLE, sentences=2)
    assert summary == (
        "Solar panels turn sunlight into power for homes. "
        "Cheap solar panels make solar power popular."
    )
    assert "cat" not in summary
    assert "weather" not in summary


async def test_summarize_short_text_is_returned_whole(call: Call) -> None:
    assert await call(summarize, text="One.  Two.") == "One. Two."
    assert await call(summarize, text="") == ""


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (text_stats, {"text": "x", "top": 0}),
        (keywords, {"text": "x", "top": 101}),
        (summarize, {"text": "x", "sentences": 0}),
        (summarize, {"text": 5}),
        (keywords, {}),
    ],
)
async def test_text_tools_schema_bounds(call: Call, tool: Any, arguments: dict[str, Any]) -> None:
    with pytest.raises(JsonSchemaValueException):
        await call(tool, **arguments)
