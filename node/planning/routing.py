"""Plain text that names no skill, without a model: the card's ``default_skill``, else the router.

The router (:mod:`node.planning.router`) runs its best skill only when it is sure (threshold and
margin), the skill takes one required string parameter, and the skill is read-only (a guess never
changes anything). Otherwise the task waits in input-required with the best candidates and how to
call each (:class:`~node.planning.direct.NeedsChoice`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.errors import ConfigError
from node.planning.direct import NeedsChoice, named_call
from node.planning.request import Request
from node.planning.router import Ranking, SkillDoc, SkillRouter
from node.planning.settings import RoutingSettings
from node.planning.text import text_parameter
from node.tooling import Tool, ToolCall

__all__ = ["TextRouting", "skill_docs"]


def skill_docs(skills: Mapping[str, Tool]) -> list[SkillDoc]:
    """What the router reads of each skill: id, description, tags and examples."""
    return [
        SkillDoc(
            id=name,
            description=str(tool.description),
            tags=tool.policy.tags,
            examples=tool.policy.examples,
        )
        for name, tool in skills.items()
    ]


def _how(tool: Tool, name: str) -> dict[str, Any]:
    param = text_parameter(tool)
    required = list(tool.parameters.get("required", []))
    candidate: dict[str, Any] = {
        "skill": name,
        "description": str(tool.description).split("\n", 1)[0][:200],
        "takes_text": param is not None,
        "call": {"skill": name, "arguments": {r: f"<{r}>" for r in required}},
    }
    if tool.policy.examples:
        candidate["example"] = tool.policy.examples[0]
    return candidate


class TextRouting:
    """Plans plain text for one node; the router's index is rebuilt when the skills change."""

    def __init__(self, settings: RoutingSettings) -> None:
        self.settings = settings
        self._index: tuple[Mapping[str, Tool], SkillRouter] | None = None

    def router(self, skills: Mapping[str, Tool]) -> SkillRouter:
        """The index for ``skills`` (the same mapping object means the same skills)."""
        if self._index is None or self._index[0] is not skills:
            self._index = (skills, SkillRouter(skill_docs(skills)))
        return self._index[1]

    def rank(self, text: str, skills: Mapping[str, Tool]) -> Ranking:
        return self.router(skills).rank(text)

    def plan(self, text: str, skills: Mapping[str, Tool]) -> ToolCall:
        """The call for ``text``, or raise :class:`NeedsChoice` (or a planning error)."""
        default = self.settings.default_skill
        if default is not None:
            if default not in skills:
                raise ConfigError(f"the card's default_skill {default!r} is not a skill here")
            return named_call(skills, default, Request(text=text))
        if not self.settings.router:
            raise NeedsChoice(
                "this node needs a named skill: send the text with metadata.skill set, or a data "
                "part {'skill': <id>, 'arguments': {...}}",
                text,
                [_how(skills[n], n) for n in sorted(skills)[: self.settings.candidates]],
            )
        ranking = self.rank(text, skills)
        sure = ranking.sure(self.settings.threshold, self.settings.margin)
        if sure is not None:
            tool = skills[sure.skill]
            if tool.read_only and text_parameter(tool) is not None:
                return named_call(skills, sure.skill, Request(text=text))
        raise self._choice(text, ranking, skills, sure.skill if sure else None)

    def _choice(
        self, text: str, ranking: Ranking, skills: Mapping[str, Tool], sure: str | None
    ) -> NeedsChoice:
        scored = ranking.scored[: self.settings.candidates]
        candidates = [{**_how(skills[s.skill], s.skill), "score": s.score} for s in scored]
        if not candidates:
            names = sorted(skills)[: self.settings.candidates]
            candidates = [{**_how(skills[n], n), "score": 0.0} for n in names]
            lead = "No skill matches the text."
        elif sure is not None:
            lead = (
                f"The text asks for {sure!r}, which needs structured arguments or is not read-only."
            )
        else:
            lead = "Which skill? The text does not clearly name one."
        listed = "; ".join(
            f"{c['skill']} ({c['score']:.2f}): {c['description']}" for c in candidates
        )
        message = (
            f"{lead} Candidates: {listed or '(none)'}. Reply with a candidate's id to run it on "
            "your text, or send the text with metadata.skill (or skill_id) set, or a data part "
            "{'skill': <id>, 'arguments': {...}}."
        )
        return NeedsChoice(message, text, candidates)
