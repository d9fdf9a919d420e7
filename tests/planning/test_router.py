"""The skill router and plain-text routing, without a node: terms, ranking, sureness, answers."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from node.errors import ConfigError
from node.planning import NeedsChoice, NeedsInput, TextRouting
from node.planning.router import Ranking, Scored, SkillDoc, SkillRouter, terms
from node.planning.settings import RoutingSettings
from node.planning.text import text_arguments, text_parameter
from node.tooling import Tool, tool


@tool(read_only=True, tags=("text",), examples=("Summarize this article",))
def summarize(text: str, sentences: int = 3) -> str:
    """Summarize a text by picking its most representative sentences."""
    return text


@tool(read_only=True, tags=("text",), examples=("How many words are in this text?",))
def text_stats(text: str) -> dict[str, int]:
    """Count the words and sentences of a text."""
    return {"words": len(text.split())}


@tool(read_only=True, tags=("web",), examples=("Fetch https://example.org/",))
def fetch(url: str) -> str:
    """Fetch a web page and return its text."""
    return url


@tool(read_only=True, tags=("math",), examples=("Mean of 3, 1, 4",))
def mean(numbers: Annotated[list[float], Field(min_length=1)]) -> float:
    """Average of a list of numbers."""
    return sum(numbers) / len(numbers)


@tool(tags=("files",), examples=("Write hello to notes.txt",))
def save(text: str) -> str:
    """Write a text to a file."""
    return text


SKILLS: dict[str, Tool] = {t.name: t for t in (summarize, text_stats, fetch, mean, save)}


def plan(text: str, **settings: Any) -> tuple[str, dict[str, Any]]:
    call = TextRouting(RoutingSettings(**settings)).plan(text, SKILLS)
    return call.name, call.arguments


def test_terms_are_stemmed_and_cut_urls_and_numbers_are_one_term_each() -> None:
    assert terms("Summarizing the summaries") == ["summar", "summar"]
    assert terms("fetch https://example.org/a?b=1 twice, 42 and 3.5") == [
        "fetch", "url", "twice", "0", "0",
    ]  # fmt: skip
    assert terms("2 * (3 + 4)") == ["0", "*", "0", "+", "0"]


def test_scores_are_normalised_best_first_and_unknown_words_score_nothing() -> None:
    router = SkillRouter([SkillDoc("a", "apples and pears"), SkillDoc("b", "pears only")])
    ranking = router.rank("apples please")
    assert [s.skill for s in ranking.scored] == ["a"]
    assert 0 < ranking.scored[0].score < 1
    assert router.rank("zebra").scored == ()
    both = router.rank("pears")
    assert {s.skill for s in both.scored} == {"a", "b"}


@pytest.mark.parametrize(
    ("scores", "threshold", "margin", "sure"),
    [
        ([0.6, 0.1], 0.3, 0.2, "a"),
        ([0.25, 0.0], 0.3, 0.2, None),  # below the threshold
        ([0.6, 0.5], 0.3, 0.2, None),  # leads by less than 20 % of its score
        ([0.6], 0.3, 0.2, "a"),
        ([], 0.0, 0.0, None),
    ],
)
def test_the_router_is_sure_only_above_the_threshold_and_by_the_margin(
    scores: list[float], threshold: float, margin: float, sure: str | None
) -> None:
    ranking = Ranking(tuple(Scored(name, s) for name, s in zip("abc", scores, strict=False)))
    best = ranking.sure(threshold, margin)
    assert (best.skill if best else None) == sure


def test_clear_text_runs_its_skill_with_the_text() -> None:
    assert plan("Please summarize this article: it rained.") == (
        "summarize",
        {"text": "Please summarize this article: it rained."},
    )


def test_a_url_parameter_takes_the_first_url_of_the_text() -> None:
    assert plan("fetch the web page https://example.org/news, please") == (
        "fetch",
        {"url": "https://example.org/news"},
    )


def test_a_list_of_numbers_takes_the_numbers_of_the_text() -> None:
    assert plan("the mean of 4, 8 and -1.5 please") == ("mean", {"numbers": [4, 8, -1.5]})
    with pytest.raises(NeedsInput, match="needs: numbers"):
        plan("the mean of my numbers")


def test_unclear_text_asks_which_skill_with_the_best_candidates() -> None:
    with pytest.raises(NeedsChoice) as caught:
        plan("this text", candidates=2)
    data = caught.value.to_data()
    assert sorted(c["skill"] for c in data["candidates"]) == ["summarize", "text_stats"]
    first = data["candidates"][0]
    assert first["takes_text"] is True and first["call"] == {
        "skill": first["skill"],
        "arguments": {"text": "<text>"},
    }
    assert data["pending"]["text"] == "this text"
    assert data["pending"]["choose"] == [c["skill"] for c in data["candidates"]]
    assert "Which skill?" in str(caught.value) and "metadata.skill" in str(caught.value)


def test_a_skill_that_is_not_read_only_is_offered_never_run() -> None:
    with pytest.raises(NeedsChoice) as caught:
        plan("write hello to a file")
    assert caught.value.candidates[0]["skill"] == "save"
    assert "not read-only" in str(caught.value)


def test_text_that_matches_nothing_offers_skills_to_choose_from() -> None:
    with pytest.raises(NeedsChoice, match="No skill matches") as caught:
        plan("good morning")
    assert len(caught.value.candidates) == 3


def test_the_default_skill_takes_any_plain_text() -> None:
    assert plan("good morning", default_skill="text_stats") == (
        "text_stats",
        {"text": "good morning"},
    )
    with pytest.raises(ConfigError, match="default_skill 'nope'"):
        plan("good morning", default_skill="nope")


def test_the_index_is_rebuilt_only_when_the_skills_change() -> None:
    routing = TextRouting(RoutingSettings())
    first = routing.router(SKILLS)
    assert routing.router(SKILLS) is first
    fewer = {"fetch": fetch}
    assert len(routing.router(fewer)) == 1


def test_text_parameter_counts_only_required_parameters() -> None:
    assert text_parameter(summarize) == "text"  # its optional integer does not count
    assert text_parameter(mean) == "numbers"
    assert text_arguments(fetch, "url", "no url here") == {}  # so the caller is asked for it
    assert text_arguments(summarize, "text", "any text") == {"text": "any text"}


def test_a_url_parameter_without_a_url_in_the_text_is_asked_for() -> None:
    with pytest.raises(NeedsInput, match="needs: url"):
        TextRouting(RoutingSettings(default_skill="fetch")).plan("the news page", SKILLS)


def test_a_very_long_text_is_not_kept_for_the_choice() -> None:
    choice = NeedsChoice("which?", "x" * 40_000, [{"skill": "summarize"}])
    assert choice.to_data()["pending"] == {"choose": ["summarize"]}
