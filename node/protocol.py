"""The A2A wire as a2a-node speaks it: extension URIs, groups of task states, and wire values.

Extensions (URNs: they name the contract and resolve to no host):

- ``SKILL_SCHEMAS``: declared in ``capabilities.extensions`` of a node's card; ``params`` is
  ``{"agent_id": str, "schemas": {skill_id: <JSON Schema of the skill's input>}}`` so that peers and
  orchestrators can validate arguments before they call.
- ``HOP``: key in ``message.metadata`` of a forwarded message; the value is
  ``{"chain": [agent_id, ...], "max_hops": int, "deadline": <epoch seconds>}``.

Agent ids: :data:`AGENT_ID_PATTERN` is the one rule for a node card's ``id``, the ``agent_id`` its
extensions declare, each hop in a chain and the registry's keys (peer tools are named after it).

State groups: ``TERMINAL`` states never change again; ``INTERRUPTED`` states (input-required,
auth-required) wait for the caller. Tasks a dead process left submitted or working are *orphaned*
(see :mod:`node.store.recovery`), a different thing.

Wire values: ``google.protobuf.Value`` stores every number as a double, so ``{"limit": 5}``
arrives as ``{"limit": 5.0}``; :func:`normalise_numbers` turns whole floats back into ints.
"""

from __future__ import annotations

import re
from typing import Any

from a2a.types import TaskState

__all__ = [
    "AGENT_ID_PATTERN",
    "HOP",
    "INTERRUPTED",
    "SKILL_SCHEMAS",
    "TERMINAL",
    "normalise_numbers",
]

SKILL_SCHEMAS = "urn:a2a-node:ext:skill-schemas:v1"
HOP = "urn:a2a-node:ext:hop:v1"

AGENT_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})


def normalise_numbers(value: Any) -> Any:
    """Whole floats (exactly representable, |x| < 2**53) back to ints, recursively."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_numbers(v) for v in value]
    return value
