"""The direct planner: a request names its skill or tools, or its text is routed; no model.

Accepted shapes, in this order (the first that applies wins):

1. a follow-up to an input-required task: the missing arguments as ``{"arguments": {...}}``, as a
   bare object, as a JSON object in text, or as text when one string parameter is missing; or, after
   the router offered candidates, a candidate's id as text (it runs on the first text)
2. a data part ``{"skill"|"tool": ..., "arguments": {...}}`` or ``{"calls": [...]}``
3. the same object written as JSON in a text part (:func:`node.planning.text.json_call`)
4. a skill named in metadata (message ``skill``/``skill_id``, then request ``skill``/``skill_id``):
   text fills its one required string parameter; otherwise a data part or a JSON object in the text
   holds its arguments; otherwise the caller is asked for them (input-required)
5. plain text (see :func:`is_free_text`): the LLM planner when the card has one (the executor's
   choice), else :class:`~node.planning.routing.TextRouting` (``default_skill``, then the router)

Only the given ``skills`` may be named: internal tools are invisible to remote callers.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from node.errors import PlanningError
from node.planning.request import Request
from node.planning.text import (
    CALL_KEYS,
    InvalidRequest,
    json_call,
    json_object,
    text_arguments,
    text_parameter,
)
from node.tooling import Tool, ToolCall

if TYPE_CHECKING:
    from node.planning.routing import TextRouting

__all__ = ["InputNeeded", "InvalidRequest", "NeedsChoice", "NeedsInput", "NoSkillNamed",
           "UnknownSkill", "is_free_text", "named_call", "plan_request", "skills_help"]  # fmt: skip


class UnknownSkill(PlanningError):
    """The request names a skill this node does not publish."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name  # the skill asked for, when the request named one as text


class NoSkillNamed(PlanningError):
    """The request names no skill; the message says which exist and how to call them."""


class InputNeeded(Exception):
    """The caller must say more; the task waits in input-required with :meth:`to_data`.

    A control signal, not an error: it is outside the :class:`node.errors.NodeError` tree.
    """

    def to_data(self) -> dict[str, Any]:
        """The data part sent with the input-required status (and read back on the follow-up)."""
        raise NotImplementedError


class NeedsInput(InputNeeded):
    """Required arguments are missing; the caller is asked for them."""

    def __init__(
        self,
        skill: str,
        arguments: Mapping[str, Any],
        missing: list[str],
        schema: Any,
        reason: str | None = None,
    ):
        super().__init__(reason or f"skill {skill!r} needs: {', '.join(missing)}")
        self.skill = skill
        self.arguments = dict(arguments)
        self.missing = missing
        self.schema = schema

    def to_data(self) -> dict[str, Any]:
        return {
            "pending": {"skill": self.skill, "arguments": self.arguments},
            "missing": self.missing,
            "schema": self.schema,
            "how": "reply on this task with {'arguments': {<missing name>: <value>, ...}}",
        }


#: Longest text kept with a :class:`NeedsChoice` so that a reply naming a candidate runs on it.
MAX_CHOICE_TEXT = 32_000


class NeedsChoice(InputNeeded):
    """Plain text no skill clearly fits: the caller picks one of ``candidates`` (best first).

    The reply may be a candidate's id as text (it then runs on ``text``, kept when it is at most
    :data:`MAX_CHOICE_TEXT` characters), or any new request.
    """

    def __init__(self, message: str, text: str, candidates: list[dict[str, Any]]):
        super().__init__(message)
        self.text = text
        self.candidates = candidates

    def to_data(self) -> dict[str, Any]:
        pending: dict[str, Any] = {"choose": [c["skill"] for c in self.candidates]}
        if len(self.text) <= MAX_CHOICE_TEXT:
            pending["text"] = self.text
        return {
            "pending": pending,
            "candidates": self.candidates,
            "how": "reply with a candidate's id to run it on your text, or send the text again "
            "with metadata.skill (or skill_id) set, or a data part "
            "{'skill': <id>, 'arguments': {...}}",
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


def _lookup(skills: Mapping[str, Tool], name: Any) -> Tool:
    if not isinstance(name, str) or name not in skills:
        close = difflib.get_close_matches(str(name), list(skills), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownSkill(f"unknown skill {name!r}{hint}", name if isinstance(name, str) else None)
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


def _input_schema(tool: Tool, names: list[str]) -> dict[str, Any]:
    props = tool.parameters.get("properties", {})
    return {"type": "object", "properties": {m: props.get(m, {}) for m in names}, "required": names}


def _call(skills: Mapping[str, Tool], entry: Any, *, ask_for_missing: bool) -> ToolCall:
    if not isinstance(entry, dict):
        raise InvalidRequest("each call must be an object with 'skill' (or 'tool') and 'arguments'")
    tool = _lookup(skills, entry.get("skill", entry.get("tool")))
    arguments = _arguments(entry.get("arguments"))
    missing = _missing(tool, arguments)
    if missing and ask_for_missing:
        raise NeedsInput(str(tool.name), arguments, missing, _input_schema(tool, missing))
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
        props = tool.parameters.get("properties", {})
        obj = json_object(request.text)
        if len(missing) == 1 and props.get(missing[0], {}).get("type") == "string":
            supplied = text_arguments(tool, missing[0], request.text)
        elif obj is not None:
            supplied = obj.get("arguments", obj)
        else:
            raise InvalidRequest(
                f"send the missing arguments as data or a JSON object: {', '.join(missing)}"
            )
    supplied = _arguments(supplied)
    if not isinstance(supplied, dict):
        raise InvalidRequest("the missing arguments must be a JSON object")
    arguments.update(supplied)
    return _call(skills, {"skill": tool.name, "arguments": arguments}, ask_for_missing=True)


def _chosen(skills: Mapping[str, Tool], request: Request, pending: Mapping[str, Any]) -> Any:
    """The candidate a reply to :class:`NeedsChoice` names by id as its whole text, or None."""
    if request.data or request.named_skill is not None or "text" not in pending:
        return None
    reply = request.text.strip().strip("'\"`.").lower()
    for skill in pending.get("choose") or []:
        if isinstance(skill, str) and reply in (skill.lower(), skill.lower().replace("_", " ")):
            return named_call(skills, skill, Request(text=str(pending.get("text", ""))))
    return None


def _structured(request: Request) -> dict[str, Any] | None:
    """The first data part naming a skill, tool or calls, else a JSON call in the text."""
    for item in request.data:
        if isinstance(item, dict) and CALL_KEYS & item.keys():
            return item
    return json_call(request.text) if request.text else None


def is_free_text(request: Request) -> bool:
    """Text naming no skill and carrying no call (raises :class:`InvalidRequest` for bad JSON)."""
    return bool(request.text) and request.named_skill is None and _structured(request) is None


def named_call(skills: Mapping[str, Tool], skill: Any, request: Request) -> ToolCall:
    """The call of a skill named outside the parts, its arguments taken from the request."""
    tool = _lookup(skills, skill)
    name = str(tool.name)
    param = text_parameter(tool)
    data = next((d for d in request.data if isinstance(d, dict)), None)
    obj = json_object(request.text) if request.text and param is None else None
    if param is not None and request.text:
        arguments = {**(data or {}), **text_arguments(tool, param, request.text)}
    elif data is not None:
        arguments = data
    elif obj is not None:
        arguments = obj.get("arguments", obj) if isinstance(obj.get("arguments"), dict) else obj
    elif request.text:
        required = list(tool.parameters.get("required", []))
        if not required:
            raise InvalidRequest(
                f"skill {name!r} takes no required text; send its arguments as a data part or "
                "a JSON object (its input schema is on the agent card)"
            )
        raise NeedsInput(
            name,
            {},
            required,
            _input_schema(tool, required),
            reason=f"skill {name!r} takes {', '.join(required)}, not one text: reply with "
            "{'arguments': {...}} (a data part or a JSON object)",
        )
    else:
        arguments = {}
    return _call(skills, {"skill": name, "arguments": arguments}, ask_for_missing=True)


def plan_request(
    request: Request,
    skills: Mapping[str, Tool],
    *,
    pending: Mapping[str, Any] | None = None,
    max_calls: int = 16,
    routing: TextRouting | None = None,
) -> list[ToolCall]:
    """Turn a request into tool calls, or raise a :class:`PlanningError` or :class:`InputNeeded`.

    Plain text goes to ``routing`` (``default_skill``, then the skill router) when given.
    """
    if pending is not None and "choose" in pending:
        chosen = _chosen(skills, request, pending)
        if chosen is not None:
            return [chosen]
    elif pending is not None:
        return [_continue(skills, request, pending)]
    item = _structured(request)
    if item is not None and "calls" in item:
        calls = item["calls"]
        if not isinstance(calls, list) or not calls:
            raise InvalidRequest("'calls' must be a non-empty list")
        if len(calls) > max_calls:
            raise InvalidRequest(f"too many calls: {len(calls)} > {max_calls}")
        return [_call(skills, c, ask_for_missing=False) for c in calls]
    if item is not None:
        return [_call(skills, item, ask_for_missing=True)]
    if request.named_skill is not None:
        return [named_call(skills, request.named_skill, request)]
    if request.text and routing is not None:
        return [routing.plan(request.text, skills)]
    raise NoSkillNamed(skills_help(skills))
