"""Text tools: statistics, keywords and an extractive summary (term frequency, no model).

Their work is bounded, so they run in a worker thread (the default ``isolation``): texts are at
most 2,000,000 characters, and the regular expressions are fixed and cannot backtrack beyond one
run of spaces or letters, so even hostile text takes under a second (about 0.7 s for the worst
inputs tried: long runs of spaces after punctuation, of newlines, of apostrophes).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Annotated, Any

from pydantic import Field

from node.tooling import tool

__all__ = [
    "extract_summary",
    "keywords",
    "split_sentences",
    "summarize",
    "terms",
    "text_stats",
    "words",
]

Text = Annotated[str, Field(max_length=2_000_000)]
Top = Annotated[int, Field(ge=1, le=100)]
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*|\d+(?:[.,]\d+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+(?=[\"'\u201c\u2018(\[]?[^\W_])|\n\s*\n")
_STOP_WORDS = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each even few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself just let me more most much my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up upon
    us very was we were what when where which while who whom why will with within without would
    yet you your yours yourself yourselves s t don doesn didn isn aren wasn weren won can't
    cannot i'm it's that's there's they're we're you're i've we've you've i'd i'll we'll
    don't doesn't didn't isn't aren't wasn't weren't won't shouldn't wouldn't couldn't haven't
    hasn't hadn't let's he's she's what's here's
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
_ABBREVIATIONS = frozenset(
    ["mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "e.g", "i.e", "cf", "fig", "approx"]
)


def words(text: str) -> list[str]:
    """The words of ``text`` (letters with inner apostrophes, or numbers), in order."""
    return _WORD.findall(text)


def terms(text: str) -> list[str]:
    """Lowercase content words: no stop words, no numbers, at least two letters."""
    found = (w.lower().replace("\u2019", "'") for w in words(text))
    return [w for w in found if len(w) > 1 and w not in STOP_WORDS and not w[0].isdigit()]


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (end punctuation then a new start, or a blank line);
    whitespace inside each sentence is collapsed; "Dr.", "e.g." and the like do not end one."""
    found: list[str] = []
    for raw in _SENTENCE_END.split(text):
        part = " ".join(raw.split())
        if found and found[-1].rsplit(" ", 1)[-1].lower().rstrip(".") in _ABBREVIATIONS:
            found[-1] = f"{found[-1]} {part}".strip()
        elif part:
            found.append(part)
    return found


def _top(text: str, top: int) -> list[dict[str, Any]]:
    return [{"term": t, "count": c} for t, c in Counter(terms(text)).most_common(top)]


@tool(read_only=True, tags=("text",), examples=("How many words and sentences are in this text?",))
def text_stats(text: Text, top: Top = 10) -> dict[str, Any]:
    """Count the words, characters, lines and sentences of a text, with its most frequent terms.

    Args:
        text: The text to measure.
        top: How many of the most frequent terms to list (stop words are left out).
    """
    found = words(text)
    return {
        "words": len(found),
        "characters": len(text),
        "lines": len(text.splitlines()),
        "sentences": len(split_sentences(text)),
        "average_word_length": round(sum(map(len, found)) / len(found), 2) if found else 0.0,
        "top_terms": _top(text, top),
    }


@tool(read_only=True, tags=("text",), examples=("What are the keywords of this article?",))
def keywords(text: Text, top: Top = 10) -> list[dict[str, Any]]:
    """The most frequent meaningful terms of a text (lowercase, stop words left out), most
    frequent first.

    Args:
        text: The text to analyse.
        top: How many terms to return.
    """
    return _top(text, top)


@tool(read_only=True, tags=("text",), examples=("Summarize this article in 3 sentences",))
def summarize(text: Text, sentences: Annotated[int, Field(ge=1, le=50)] = 3) -> str:
    """Summarize a text by picking its most representative sentences, in their original order.

    Sentences are ranked by the frequency of their terms across the whole text (extractive:
    the summary only contains sentences of the text).

    Args:
        text: The text to summarize.
        sentences: How many sentences to keep.
    """
    return " ".join(extract_summary(text, sentences))


def extract_summary(text: str, count: int) -> list[str]:
    """The ``count`` best-ranked sentences of ``text``, in their original order."""
    found = split_sentences(text)
    if len(found) <= count:
        return found
    frequency = Counter(terms(text))
    peak = max(frequency.values(), default=1)

    def score(index: int) -> float:
        content = terms(found[index])
        if not content:
            return 0.0
        return sum(frequency[t] / peak for t in content) / math.sqrt(len(content))

    best = sorted(range(len(found)), key=lambda i: (-score(i), i))[:count]
    return [found[i] for i in sorted(best)]
