"""A2A extension URIs of a2a-node, shared by the card builder, the executor and the peer layer.

- ``SKILL_SCHEMAS``: declared in ``capabilities.extensions`` of a node's card; ``params`` is
  ``{"agent_id": str, "schemas": {skill_id: <JSON Schema of the skill's input>}}`` so that peers and
  orchestrators can validate arguments before they call.
- ``HOP``: key in ``message.metadata`` of a forwarded message; the value is
  ``{"chain": [agent_id, ...], "max_hops": int, "deadline": <epoch seconds>}``.

URNs, not URLs: they name the contract and resolve to no host.
"""

from __future__ import annotations

SKILL_SCHEMAS = "urn:a2a-node:ext:skill-schemas:v1"
HOP = "urn:a2a-node:ext:hop:v1"
