"""The shape of an incoming request, independent of the wire: text, data parts and metadata.

Numbers arrive as doubles (``google.protobuf.Value``), so whole floats are turned back into ints at
this boundary: ``{"limit": 5.0}`` becomes ``{"limit": 5}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.protocol import normalise_numbers


@dataclass(frozen=True, slots=True)
class Request:
    """What the caller sent: its text parts joined, its data parts, and message metadata."""

    text: str = ""
    data: tuple[Any, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


def parse_request(
    texts: Sequence[str], data: Sequence[Any], metadata: Mapping[str, Any]
) -> Request:
    """Build a :class:`Request` from a message's text parts, data parts and metadata."""
    return Request(
        text="\n".join(t for t in texts if t),
        data=tuple(normalise_numbers(d) for d in data),
        metadata=normalise_numbers(dict(metadata)),
    )
