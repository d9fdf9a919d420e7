"""Text as a call: a JSON call written as text, and the one parameter a text can fill.

- A text part holding a JSON object with ``skill``, ``tool`` or ``calls`` is a structured call,
  exactly as if it had come as a data part. Text that starts with ``{`` and names one of those keys
  but is not valid JSON is a mistake worth a clear answer, not free text.
- A skill takes text when it has exactly one *required* parameter and that parameter is a string
  (optional ones keep their defaults), or a list of numbers. A URL parameter (``format: uri`` or
  named ``url``) takes the first http(s) URL in the text when there is one, so
  "fetch https://x.org/" works; a list of numbers takes the numbers written in the text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from node.errors import PlanningError
from node.tooling import Tool

__all__ = ["CALL_KEYS", "InvalidRequest", "json_call", "json_object", "text_arguments",
           "text_parameter"]  # fmt: skip

CALL_KEYS = frozenset({"skill", "tool", "calls"})
_LOOKS_LIKE_CALL = re.compile(r"""["']?(skill|tool|calls)["']?\s*:""")
_URL = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
_URL_TRAILING = ".,;:!?)]}"
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


class InvalidRequest(PlanningError):
    """The request has an unusable shape."""


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed as a JSON object, or None when it is not one."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def json_call(text: str) -> dict[str, Any] | None:
    """The structured call written in ``text``, or None for text that is not one.

    Raises :class:`InvalidRequest` for text that starts like a JSON call but does not parse.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        if _LOOKS_LIKE_CALL.search(stripped[:200]):
            raise InvalidRequest(
                f"the text looks like a JSON call but is not valid JSON ({exc.msg} at line "
                f"{exc.lineno} column {exc.colno}); send "
                '{"skill": "<id>", "arguments": {...}} as valid JSON, or plain text'
            ) from exc
        return None
    if isinstance(value, dict) and CALL_KEYS & value.keys():
        return value
    return None


def _numbers_schema(schema: Any) -> bool:
    items = schema.get("items") if isinstance(schema, dict) else None
    return (
        schema.get("type") == "array"
        and isinstance(items, dict)
        and items.get("type") in ("number", "integer")
    )


def text_parameter(tool: Tool) -> str | None:
    """The one required parameter text can fill (a string or a list of numbers), or None."""
    required = list(tool.parameters.get("required", []))
    if len(required) != 1:
        return None
    schema = tool.parameters.get("properties", {}).get(required[0], {})
    if isinstance(schema, dict) and (schema.get("type") == "string" or _numbers_schema(schema)):
        return str(required[0])
    return None


def text_arguments(tool: Tool, name: str, text: str) -> dict[str, Any]:
    """``{name: value}`` for ``text``: the first URL for a URL parameter, the numbers for a list
    of numbers (none found: ``{}``, so the caller is asked for it), else the whole text."""
    schema = tool.parameters.get("properties", {}).get(name, {})
    if _numbers_schema(schema):
        found = [float(n) for n in _NUMBER.findall(text)]
        numbers = [int(n) if n.is_integer() and abs(n) < 2**53 else n for n in found]
        return {name: numbers} if numbers else {}
    if name == "url" or (isinstance(schema, dict) and schema.get("format") in ("uri", "url")):
        url = _URL.search(text)
        return {name: url.group(0).rstrip(_URL_TRAILING)} if url else {}
    return {name: text}
