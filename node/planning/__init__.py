"""Planning: turn an incoming request into tool calls (no HTTP, no store)."""

from node.planning.direct import (
    InputNeeded,
    NeedsChoice,
    NeedsInput,
    NoSkillNamed,
    UnknownSkill,
    plan_request,
)
from node.planning.request import Request, parse_request
from node.planning.routing import TextRouting

__all__ = ["InputNeeded", "NeedsChoice", "NeedsInput", "NoSkillNamed", "Request", "TextRouting",
           "UnknownSkill", "parse_request", "plan_request"]  # fmt: skip
