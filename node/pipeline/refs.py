"""References in step arguments: explicit JSON pointers into the input and earlier results.

Exactly one form exists. Anywhere inside a step's ``arguments`` (nested dicts and lists too), a
*string value* of one of these shapes is replaced by the value it points at, whole and with its
type kept (a number stays a number, a list stays a list)::

    "$input"                      the pipeline's (validated) input object
    "$input/query"                a member of it: an RFC 6901 pointer after the prefix
    "$steps/fetch"                the output of step ``fetch``
    "$steps/fetch/items/0/url"    a pointer into that output (array indices, ``~1`` = "/",
                                  ``~0`` = "~")

A string that starts with ``$$`` is a literal: one ``$`` is dropped (``"$$5"`` → ``"$5"``). Any
other string starting with ``$`` is refused when the card loads, so a typo never passes silently.
Object keys are never interpreted, and an object of the form ``{"$ref": "..."}`` is refused: it
is not a reference here. Nothing is evaluated; there are no templates inside strings.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from node.errors import ToolExecutionError

__all__ = ["STEP_ID_PATTERN", "Ref", "compile_arguments", "parse_pointer", "references", "resolve"]

STEP_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INDEX = re.compile(r"^(0|[1-9][0-9]*)$")
_BAD_ESCAPE = re.compile(r"~(?![01])")
_INPUT, _STEPS = "$input", "$steps/"
_KINDS = {
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


@dataclass(frozen=True, slots=True)
class Ref:
    """A parsed reference: ``step`` is ``None`` for the pipeline's input."""

    text: str
    step: str | None
    pointer: tuple[str, ...]


def parse_pointer(pointer: str) -> tuple[str, ...]:
    """``"/a~1b/0"`` → ``("a/b", "0")``; ``""`` → ``()``; ``ValueError`` when malformed."""
    if not pointer:
        return ()
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer {pointer!r} must start with '/'")
    if _BAD_ESCAPE.search(pointer):
        raise ValueError(f"JSON pointer {pointer!r}: '~' must be followed by 0 or 1")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/"))


def _parse(text: str) -> Ref:
    if text == _INPUT or text.startswith(_INPUT + "/"):
        return Ref(text, None, parse_pointer(text[len(_INPUT) :]))
    if text.startswith(_STEPS):
        step, slash, rest = text[len(_STEPS) :].partition("/")
        if not STEP_ID_PATTERN.match(step):
            raise ValueError(f"reference {text!r}: {step!r} is not a step id")
        return Ref(text, step, parse_pointer(slash + rest))
    raise ValueError(
        f"{text!r} is not a reference: write '$input/<pointer>' or '$steps/<id>/<pointer>', "
        "or start with '$$' for a literal '$'"
    )


def compile_arguments(value: Any) -> Any:
    """A copy of ``value`` with references parsed into :class:`Ref` and ``$$`` unescaped."""
    if isinstance(value, str):
        if value.startswith("$$"):
            return value[1:]
        return _parse(value) if value.startswith("$") else value
    if isinstance(value, Mapping):
        if len(value) == 1 and "$ref" in value:
            raise ValueError(
                '{"$ref": ...} objects are not references here; write the reference as a string, '
                "e.g. '$input/x' or '$steps/<id>/x'"
            )
        return {key: compile_arguments(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [compile_arguments(item) for item in value]
    return value


def references(template: Any) -> Iterator[Ref]:
    """Every :class:`Ref` inside a compiled template."""
    if isinstance(template, Ref):
        yield template
    elif isinstance(template, dict):
        for item in template.values():
            yield from references(item)
    elif isinstance(template, list):
        for item in template:
            yield from references(item)


def resolve(template: Any, *, input: Any, steps: Mapping[str, Any], step: str) -> Any:
    """``template`` with every reference replaced by (a copy of) its value.

    ``step`` names the step being prepared, for the :class:`ToolError` raised when a reference
    has no value.
    """
    if isinstance(template, Ref):
        if template.step is None:
            document = input
        elif template.step in steps:
            document = steps[template.step]
        else:
            raise ToolExecutionError(
                f"step {step!r}: {template.text!r}: step {template.step!r} has no result"
            )
        try:
            return copy.deepcopy(_lookup(document, template.pointer))
        except LookupError as exc:
            raise ToolExecutionError(
                f"step {step!r}: {template.text!r} has no value: {exc.args[0]}"
            ) from None
    if isinstance(template, dict):
        return {k: resolve(v, input=input, steps=steps, step=step) for k, v in template.items()}
    if isinstance(template, list):
        return [resolve(v, input=input, steps=steps, step=step) for v in template]
    return template


def _lookup(document: Any, pointer: tuple[str, ...]) -> Any:
    at = ""
    for token in pointer:
        if isinstance(document, Mapping):
            if token not in document:
                raise LookupError(f"no member {token!r} at {at or '/'}")
            document = document[token]
        elif isinstance(document, list):
            if not _INDEX.match(token):
                raise LookupError(f"{token!r} is not an array index at {at or '/'}")
            if int(token) >= len(document):
                raise LookupError(
                    f"index {token} out of range at {at or '/'} (length {len(document)})"
                )
            document = document[int(token)]
        else:
            kind = _KINDS.get(type(document), type(document).__name__)
            raise LookupError(f"cannot look up {token!r} in {kind} at {at or '/'}")
        at += "/" + token.replace("~", "~0").replace("/", "~1")
    return document
