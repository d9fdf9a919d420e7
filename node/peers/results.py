"""Turn a peer's answer (a finished Task or a direct Message) into a tool result.

A direct Message and a Task's single artifact read alike (:func:`parts_result`):

- one data part (beside any text parts, which describe it) → that data;
- only text parts → the texts joined by newlines;
- anything else → the parts as JSON; several artifacts that are not all text →
  ``[{"name": artifact name, "parts": [part as JSON]}, ...]``.

A completed Task without artifacts → the text of its final status message.

``google.protobuf.Value`` stores every number as a double, so whole numbers come back as ints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.types import Artifact, Message, Part
from google.protobuf.json_format import MessageToDict

from node.protocol import normalise_numbers

__all__ = ["message_text", "parts_result", "task_result"]


def _part_json(part: Part) -> Any:
    return normalise_numbers(MessageToDict(part))


def message_text(message: Message) -> str:
    """The text parts of a message, joined (empty for none)."""
    return "\n".join(p.text for p in message.parts if p.HasField("text"))


def parts_result(parts: Sequence[Part]) -> Any:
    """A result from the parts of one message or artifact.

    One data part (beside any text parts, which only describe it) is the result; text parts alone
    are joined; anything else comes back as a list of parts.
    """
    data = [p for p in parts if p.HasField("data")]
    if len(data) == 1 and all(p.HasField("text") or p is data[0] for p in parts):
        return normalise_numbers(MessageToDict(data[0].data))
    if parts and all(p.HasField("text") for p in parts):
        return "\n".join(p.text for p in parts)
    return [_part_json(p) for p in parts]


def task_result(artifacts: Sequence[Artifact], status_message: Message | None) -> Any:
    """The result of a completed task: its artifacts, else its final status message's text."""
    if not artifacts:
        return message_text(status_message) if status_message is not None else ""
    if len(artifacts) == 1:
        return parts_result(artifacts[0].parts)
    parts = [p for a in artifacts for p in a.parts]
    if parts and all(p.HasField("text") for p in parts):
        return "\n".join(p.text for p in parts)
    return [{"name": a.name, "parts": [_part_json(p) for p in a.parts]} for a in artifacts]
