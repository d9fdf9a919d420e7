"""How the CLI prints: tasks, messages, tables and JSON.

Results go to stdout, progress and state to stderr, so ``a2a-node send … > out.txt`` keeps only
results. With ``--json`` a command prints one JSON document on stdout instead. Numbers are
printed as they were meant: protobuf stores every number as a double, so whole floats are turned
back into ints (:func:`node.protocol.normalise_numbers`) before anything is shown.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from a2a.types import Message, Task, TaskState
from google.protobuf.json_format import MessageToDict

from node.cli.common import EXIT_FAILED, EXIT_OK, EXIT_PARTIAL
from node.client import part_value, status_text
from node.protocol import normalise_numbers

__all__ = [
    "failed_calls",
    "first_sentence",
    "format_table",
    "message_exit_code",
    "print_json",
    "print_message",
    "print_task",
    "state_name",
    "task_exit_code",
    "task_json",
    "wrap",
]


def print_json(value: Any, out: TextIO | None = None) -> None:
    """``value`` as indented JSON, whole numbers as ints."""
    text = json.dumps(normalise_numbers(value), indent=2, ensure_ascii=False)
    print(text, file=out or sys.stdout)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(text: str) -> str:
    """The first sentence of a description's first paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(paragraph, maxsplit=1)[0]


def wrap(text: str, indent: str = "  ") -> str:
    """``text`` wrapped to the terminal's width (100 columns when it is not a terminal)."""
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    return textwrap.fill(text, width=width, initial_indent=indent, subsequent_indent=indent)


# -- tasks and messages ----------------------------------------------------------------------


def state_name(state: int) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` → ``input_required``."""
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_").lower()


def _data_values(message: Message) -> list[Any]:
    return [part_value(p) for p in message.parts if p.HasField("data")]


def failed_calls(task: Task) -> list[dict[str, Any]]:
    """The calls of a batch that failed: ``[{"tool", "kind", "error"}]``, in call order.

    The node stores a failed call as an artifact ``<tool>.error`` holding one data part
    ``{"error", "kind", "tool"}``; a task whose every call failed is ``failed`` instead.
    """
    failures = []
    for artifact in task.artifacts:
        if not artifact.name.endswith(".error"):
            continue
        for part in artifact.parts:
            value = part_value(part)
            if isinstance(value, dict) and {"error", "kind", "tool"} <= value.keys():
                failures.append({k: value[k] for k in ("tool", "kind", "error")})
    return failures


def task_exit_code(task: Task) -> int:
    """0 completed, 3 completed with failed calls, 1 anything else."""
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        return EXIT_FAILED
    return EXIT_PARTIAL if failed_calls(task) else EXIT_OK


def task_json(task: Task) -> dict[str, Any]:
    """A task as the CLI's ``--json`` shows it: every artifact, in order, and failed calls."""
    return {
        "kind": "task",
        "id": task.id,
        "context_id": task.context_id,
        "state": state_name(task.status.state),
        "message": status_text(task),
        "status_data": _data_values(task.status.message),
        "artifacts": [
            {"name": a.name or a.artifact_id, "values": [part_value(p) for p in a.parts]}
            for a in task.artifacts
        ],
        "failed_calls": failed_calls(task),
    }


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def print_task(task: Task, *, as_json: bool = False, url: str | None = None) -> int:
    """Print a task (artifacts on stdout, state on stderr); return its exit code.

    ``url`` (the node's) lets an input-required task say how to reply.
    """
    code = task_exit_code(task)
    if as_json:
        print_json(task_json(task))
        return code
    state = state_name(task.status.state)
    print(f"task {task.id}: {state}", file=sys.stderr)
    message = status_text(task)
    if message and task.status.state != TaskState.TASK_STATE_COMPLETED:
        print(f"  {message}", file=sys.stderr)
    for artifact in task.artifacts:  # every result, in order, even two of the same name
        for value in (part_value(p) for p in artifact.parts):
            print(
                f"--- {artifact.name or artifact.artifact_id}\n{_shown(normalise_numbers(value))}"
            )
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        missing: list[str] = []
        for value in _data_values(task.status.message):
            print(_shown(value))
            if isinstance(value, dict) and isinstance(value.get("missing"), list):
                missing += [str(name) for name in value["missing"]]
        if url:
            args = " ".join(f"--arg {name}=…" for name in missing) or "--arg NAME=VALUE"
            print(f"  reply with: a2a-node send {url} --task {task.id} {args}", file=sys.stderr)
    failures = failed_calls(task)
    if code == EXIT_PARTIAL:
        calls = "call" if len(failures) == 1 else "calls"
        print(f"partial: the task completed but {len(failures)} {calls} failed", file=sys.stderr)
        for failure in failures:
            print(f"  {failure['tool']} ({failure['kind']}): {failure['error']}", file=sys.stderr)
    return code


def message_exit_code(message: Message) -> int:
    """1 when the agent's message carries an error body (``{"error": …}``), else 0."""
    errors = [v for v in _data_values(message) if isinstance(v, dict) and "error" in v]
    return EXIT_FAILED if errors else EXIT_OK


def print_message(message: Message, *, as_json: bool = False) -> int:
    """Print an agent's direct answer (no task): data on stdout, text on stderr."""
    code = message_exit_code(message)
    if as_json:
        print_json(
            {
                "kind": "message",
                "message_id": message.message_id,
                "text": "\n".join(p.text for p in message.parts if p.HasField("text")),
                "data": _data_values(message),
                "metadata": MessageToDict(message.metadata),
            }
        )
        return code
    print("message (the agent answered directly, no task)", file=sys.stderr)
    data = _data_values(message)
    for part in message.parts:  # with data, the text is a summary; without, it is the answer
        if part.HasField("text"):
            print(f"  {part.text}" if data else part.text, file=sys.stderr if data else sys.stdout)
    for value in data:
        print(_shown(value))
    return code
