"""Planning: turn an incoming request into tool calls (no HTTP, no store)."""

from node.planning.direct import (
    NeedsInput,
    NoSkillNamed,
    UnknownSkill,
    plan_request,
)
from node.planning.request import Request, parse_request

__all__ = ["NeedsInput", "NoSkillNamed", "Request", "UnknownSkill", "parse_request", "plan_request"]
