"""What goes into and comes out of the runner: calls, results and progress events."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from node.errors import ErrorKind

__all__ = [
    "EventCallback",
    "ToolCall",
    "ToolEvent",
    "ToolResult",
    "new_call_id",
    "non_finite_path",
    "to_text",
]


def new_call_id() -> str:
    """A short random id (12 hex digits)."""
    return os.urandom(6).hex()


def to_text(output: Any) -> str:
    """The text form of an output: strings as they are, anything else as compact JSON."""
    if isinstance(output, str):
        return output
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"), default=str)


def non_finite_path(output: Any) -> str | None:
    """The JSON pointer of the first NaN or infinity in ``output`` ("" for the root), or None.

    Walks dicts, lists and tuples only; each container is visited once (cycles end the walk).
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", output)]
    while stack:
        pointer, value = stack.pop()
        if isinstance(value, float):
            if not math.isfinite(value):
                return pointer
        elif isinstance(value, Mapping | list | tuple):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            children = [(f"{pointer}/{_escape(str(k))}", v) for k, v in items]
            stack.extend(reversed(children))
    return None


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(slots=True)
class ToolCall:
    """A request to run ``name`` on raw ``arguments`` (a dict, a JSON string or ``None``).

    ``timeout`` (seconds) replaces the tool's own for this call (a pipeline step's).
    """

    name: str
    arguments: Any = None
    id: str = field(default_factory=new_call_id)
    timeout: float | None = None


@dataclass(slots=True, eq=False)
class ToolResult:
    """The outcome of one call; failures are results too, with a stable ``error_kind``."""

    call_id: str
    tool: str
    ok: bool
    output: Any = None  # str or JSON data
    error_kind: ErrorKind | None = None
    error: str | None = None
    duration_s: float = 0.0
    truncated: bool = False
    full_output_ref: str | None = None
    _text: str | None = field(default=None, repr=False)

    @classmethod
    def failure(
        cls, call: ToolCall, kind: ErrorKind, message: str, duration_s: float = 0.0
    ) -> ToolResult:
        return cls(call.id, call.name, False, None, kind, message, duration_s)

    @property
    def text(self) -> str:
        """What a model reads: the output as text, or ``error (<kind>): <message>``."""
        if self._text is None:
            if self.ok:
                self._text = to_text(self.output)
            else:
                self._text = f"error ({self.error_kind}): {self.error}"
        return self._text

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "ok": self.ok,
            "output": self.output,
            "error_kind": None if self.error_kind is None else str(self.error_kind),
            "error": self.error,
            "duration_s": self.duration_s,
            "truncated": self.truncated,
            "full_output_ref": self.full_output_ref,
        }


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A call ``started``, or ``finished`` (then ``result`` holds its duration and outcome)."""

    kind: Literal["started", "finished"]
    call: ToolCall
    result: ToolResult | None = None

    @property
    def tool(self) -> str:
        return self.call.name

    @property
    def ok(self) -> bool | None:
        return None if self.result is None else self.result.ok

    @property
    def error_kind(self) -> ErrorKind | None:
        return None if self.result is None else self.result.error_kind

    @property
    def duration_s(self) -> float:
        return 0.0 if self.result is None else self.result.duration_s


EventCallback = Callable[[ToolEvent], Awaitable[None]]
