"""The skill router: plain text → the public skill it most likely asks for, with no model.

Each skill is one weighted bag of terms: its id and name (×3), tags (×2), description and
``examples`` (×1). A term is a lower-cased word (or an arithmetic operator) with English stop words
dropped, Snowball-stemmed and cut to six characters (so "summarize" and "summary" meet); every URL
is the term "url" and every number "0" (their shape matters, not their value). A text is
scored against every skill with Okapi BM25 (k1 = 1.2, b = 0.75), then normalised to 0–1 by the most
any skill could score for the text's known terms (terms no skill uses count for nothing):

    score(text, skill) = BM25(text, skill) / Σ_{known terms t of text} idf(t)·(k1 + 1)

The router is sure when the best skill's score reaches the threshold and leads the runner-up by the
margin (:class:`~node.planning.settings.RoutingSettings`); the caller decides what to do with a
:class:`Ranking` either way. Only the first :data:`MAX_ROUTED_CHARS` characters of a text are read:
the intent comes first, and routing stays cheap whatever the payload.

No library does this for a few dozen short documents without numpy/scipy (``bm25s``) or is still
maintained (``rank-bm25``); the BM25 arithmetic is a dozen lines. Stemming is ``snowballstemmer``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import snowballstemmer

__all__ = ["MAX_ROUTED_CHARS", "Ranking", "Scored", "SkillDoc", "SkillRouter", "terms"]

MAX_ROUTED_CHARS = 1000
K1 = 1.2
B = 0.75
_STEM_CHARS = 6
_URL = re.compile(r"\b(?:https?|ftp)://\S+", re.IGNORECASE)
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_WORD = re.compile(r"[^\W_]+|[+*/^%]")
_STOP = frozenset(
    """a about after all also am an and any are as at be been by can could do does for from get
    give has have he her here how i if in into is it its just let me my need of on or our please
    she show so some tell than that the their them then there these they this those to up us
    using want was we what when where which who will with would you your""".split()  # noqa: SIM905
)
_stemmer = snowballstemmer.stemmer("english")


def terms(text: str) -> list[str]:
    """The routing terms of ``text``, in order (duplicates kept); a URL is "url", a number "0"."""
    text = _NUMBER.sub(" 0 ", _URL.sub(" url ", text.lower()))
    words = [w for w in _WORD.findall(text) if w not in _STOP]
    return [stem[:_STEM_CHARS] for stem in _stemmer.stemWords(words)]


@dataclass(frozen=True, slots=True)
class SkillDoc:
    """What the router reads of one skill."""

    id: str
    description: str = ""
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    def bag(self) -> Counter[str]:
        """Weighted term frequencies: id/name ×3, tags ×2, description and examples ×1."""
        bag: Counter[str] = Counter()
        for term in terms(self.id.replace("_", " ").replace("-", " ")):
            bag[term] += 3
        for term in terms(" ".join(self.tags)):
            bag[term] += 2
        bag.update(terms(self.description))
        for example in self.examples:
            bag.update(terms(example))
        return bag


@dataclass(frozen=True, slots=True)
class Scored:
    """One skill's normalised score (0–1) for a text."""

    skill: str
    score: float


@dataclass(frozen=True, slots=True)
class Ranking:
    """Skills by score for one text, best first (skills that share no term are left out)."""

    scored: tuple[Scored, ...]

    @property
    def best(self) -> Scored | None:
        return self.scored[0] if self.scored else None

    def sure(self, threshold: float, margin: float) -> Scored | None:
        """The best skill when it reaches ``threshold`` and leads the next by ``margin``."""
        best = self.best
        if best is None or best.score < threshold or best.score <= 0:
            return None
        runner_up = self.scored[1].score if len(self.scored) > 1 else 0.0
        return best if best.score - runner_up >= margin * best.score else None


class SkillRouter:
    """A BM25 index over a fixed set of skills; build it once per set of skills."""

    def __init__(self, docs: Iterable[SkillDoc]) -> None:
        bags = {doc.id: doc.bag() for doc in docs}
        count = len(bags)
        lengths = {skill: sum(bag.values()) for skill, bag in bags.items()}
        avg_len = (sum(lengths.values()) / count) if count else 1.0
        # (bag, the BM25 length normaliser K1·(1 − B + B·|d|/avg|d|)) per skill
        self._docs = {s: (bag, K1 * (1 - B + B * lengths[s] / avg_len)) for s, bag in bags.items()}
        df: Counter[str] = Counter()
        for bag in bags.values():
            df.update(bag.keys())
        self._idf = {t: math.log(1 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}

    def __len__(self) -> int:
        return len(self._docs)

    def rank(self, text: str) -> Ranking:
        """Every skill sharing a term with ``text``, scored 0–1, best first (ties by id)."""
        known = {t for t in terms(text[:MAX_ROUTED_CHARS]) if t in self._idf}
        ceiling = sum(self._idf[t] for t in known) * (K1 + 1)
        if not known or ceiling <= 0:
            return Ranking(())
        scored = []
        for skill, (bag, norm) in self._docs.items():
            total = 0.0
            for term in known:
                tf = bag.get(term, 0)
                if tf:
                    total += self._idf[term] * tf * (K1 + 1) / (tf + norm)
            if total > 0:
                scored.append(Scored(skill, round(total / ceiling, 4)))
        scored.sort(key=lambda s: (-s.score, s.skill))
        return Ranking(tuple(scored))
