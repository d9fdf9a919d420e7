"""The shape of an incoming request, independent of the wire: text, data parts and metadata.

Numbers arrive as doubles (``google.protobuf.Value``), so whole floats are turned back into ints at
this boundary: ``{"limit": 5.0}`` becomes ``{"limit": 5}``.

A skill may be named outside the parts: in the message's metadata (``skill``, or ``skill_id`` as
crewAI writes it) or in the request's own metadata (``params.metadata``, where Google ADK's
metadata hook writes); the message's wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.protocol import normalise_numbers

SKILL_KEYS = ("skill", "skill_id")


@dataclass(frozen=True, slots=True)
class Request:
    """What the caller sent: its text parts joined, data parts, message and request metadata."""

    text: str = ""
    data: tuple[Any, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    request_metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def named_skill(self) -> Any:
        """The skill named in message or request metadata (any JSON value), or None."""
        for source in (self.metadata, self.request_metadata):
            for key in SKILL_KEYS:
                if source.get(key) is not None:
                    return source[key]
        return None


def parse_request(
    texts: Sequence[str],
    data: Sequence[Any],
    metadata: Mapping[str, Any],
    request_metadata: Mapping[str, Any] | None = None,
) -> Request:
    """Build a :class:`Request` from a message's parts and metadata and the request's metadata."""
    return Request(
        text="\n".join(t for t in texts if t),
        data=tuple(normalise_numbers(d) for d in data),
        metadata=normalise_numbers(dict(metadata)),
        request_metadata=normalise_numbers(dict(request_metadata or {})),
    )
