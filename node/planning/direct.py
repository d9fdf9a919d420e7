"""The direct planner: a structured request names its skill or tools; no model is involved.

Accepted shapes (first data part wins; text fills a single string parameter):

- ``{"skill": "add", "arguments": {...}}`` or ``{"tool": "add", "arguments": {...}}``
- ``{"calls": [{"tool"|"skill": ..., "arguments": {...}}, ...]}`` (run by the runner's policy)
- text, with ``metadata.skill`` naming a skill whose tool takes one string parameter
- a follow-up to an input-required task: the missing arguments as ``{"arguments": {...}}``, as a
  bare object, or as text when a single string parameter is missing

Only the given ``skills`` may be named: internal tools are invisible to remote callers.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from node.errors import PlanningError
from node.planning.request import Request
from node.tooling import Tool, ToolCall


class UnknownSkill(PlanningError):
    """The request names a skill this node does not publish."""


class NoSkillNamed(PlanningError):
    """The request names no skill; the message says which exist and how to call them."""


class InvalidRequest(PlanningError):
    """The request has an unusable shape."""


class NeedsInput(Exception):
    """Required arguments are missing; the caller is asked for them.

    A control signal, not an error: it is outside the :class:`node.errors.NodeError` tree.
    """

    def __init__(self, skill: str, arguments: Mapping[str, Any], missing: list[str], schema: Any):
        super().__init__(f"skill {skill!r} needs: {', '.join(missing)}")
        self.skill = skill
        self.arguments = dict(arguments)
        self.missing = missing
        self.schema = schema

    def to_data(self) -> dict[str, Any]:
        """The data part sent with the input-required status (and read back on the follow-up)."""
        return {
            "pending": {"skill": self.skill, "arguments": self.arguments},
            "missing": self.missing,
            "schema": self.schema,
            "how": "reply on this task with {'arguments': {<missing name>: <value>, ...}}",
        }


def skills_help(skills: Mapping[str, Tool], limit: int = 20) -> str:
    """A short answer for a request that names no skill."""
    names = sorted(skills)
    shown = ", ".join(names[:limit]) + (
        f" (and {len(names) - limit} more)" if len(names) > limit else ""
    )
    return (
        f"name a skill: send a data part {{'skill': <id>, 'arguments': {{...}}}}, or text with "
        f"metadata.skill set. Skills: {shown or '(none)'}. "
        "Their input schemas are on the agent card."
    )


def _single_string_param(tool: Tool, missing: list[str] | None = None) -> str | None:
    props = tool.parameters.get("properties", {})
    candidates = missing if missing is not None else list(props)
    strings = [p for p in candidates if props.get(p, {}).get("type") == "string"]
    return strings[0] if len(strings) == 1 and len(candidates) == 1 else None


def _lookup(skills: Mapping[str, Tool], name: Any) -> Tool:
    if not isinstance(name, str) or name not in skills:
        close = difflib.get_close_matches(str(name), list(skills), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownSkill(f"unknown skill {name!r}{hint}")
    return skills[name]


def _arguments(raw: Any) -> Any:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"arguments are not valid JSON: {exc.msg}") from exc
    return raw


def _missing(tool: Tool, arguments: Any) -> list[str]:
    if not isinstance(arguments, dict):
        return []
    return [name for name in tool.parameters.get("required", []) if name not in arguments]


def _call(skills: Mapping[str, Tool], entry: Any, *, ask_for_missing: bool) -> ToolCall:
    if not isinstance(entry, dict):
        raise InvalidRequest("each call must be an object with 'skill' (or 'tool') and 'arguments'")
    tool = _lookup(skills, entry.get("skill", entry.get("tool")))
    arguments = _arguments(entry.get("arguments"))
    missing = _missing(tool, arguments)
    if missing and ask_for_missing:
        props = tool.parameters.get("properties", {})
        schema = {
            "type": "object",
            "properties": {m: props.get(m, {}) for m in missing},
            "required": missing,
        }
        raise NeedsInput(str(tool.name), arguments, missing, schema)
    return ToolCall(name=str(tool.name), arguments=arguments)


def _continue(skills: Mapping[str, Tool], request: Request, pending: Mapping[str, Any]) -> ToolCall:
    tool = _lookup(skills, pending.get("skill"))
    arguments = dict(pending.get("arguments") or {})
    missing = _missing(tool, arguments)
    supplied: Any = None
    for item in request.data:
        if isinstance(item, dict):
            supplied = item.get("arguments", item)
            break
    if supplied is None and request.text:
        name = _single_string_param(tool, missing)
        if name is None:
            raise InvalidRequest(f"send the missing arguments as data: {', '.join(missing)}")
        supplied = {name: request.text}
    supplied = _arguments(supplied)
    if not isinstance(supplied, dict):
        raise InvalidRequest("the missing arguments must be a JSON object")
    arguments.update(supplied)
    return _call(skills, {"skill": tool.name, "arguments": arguments}, ask_for_missing=True)


def plan_request(
    request: Request,
    skills: Mapping[str, Tool],
    *,
    pending: Mapping[str, Any] | None = None,
    max_calls: int = 16,
) -> list[ToolCall]:
    """Turn a structured request into tool calls, or raise a :class:`PlanningError` subclass."""
    if pending is not None:
        return [_continue(skills, request, pending)]
    for item in request.data:
        if not isinstance(item, dict):
            continue
        if "calls" in item:
            calls = item["calls"]
            if not isinstance(calls, list) or not calls:
                raise InvalidRequest("'calls' must be a non-empty list")
            if len(calls) > max_calls:
                raise InvalidRequest(f"too many calls: {len(calls)} > {max_calls}")
            return [_call(skills, c, ask_for_missing=False) for c in calls]
        if "skill" in item or "tool" in item:
            return [_call(skills, item, ask_for_missing=True)]
    skill = request.metadata.get("skill")
    if skill is not None:
        tool = _lookup(skills, skill)
        name = _single_string_param(tool)
        if request.data and isinstance(request.data[0], dict) and name is None:
            arguments: dict[str, Any] = request.data[0]
        elif name is not None and request.text:
            arguments = {name: request.text}
        elif not request.text and not request.data:
            arguments = {}
        else:
            raise InvalidRequest(
                f"skill {skill!r} does not take a single text parameter; send a data part "
                "{'skill': ..., 'arguments': {...}}"
            )
        return [_call(skills, {"skill": skill, "arguments": arguments}, ask_for_missing=True)]
    raise NoSkillNamed(skills_help(skills))
