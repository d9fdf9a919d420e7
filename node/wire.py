"""Values as they come off the A2A wire.

``google.protobuf.Value`` stores every number as a double, so ``{"limit": 5}`` arrives as
``{"limit": 5.0}``. :func:`normalise_numbers` turns whole floats back into ints, recursively.
"""

from __future__ import annotations

from typing import Any

__all__ = ["normalise_numbers"]


def normalise_numbers(value: Any) -> Any:
    """Whole floats (exactly representable, |x| < 2**53) back to ints, recursively."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: normalise_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise_numbers(v) for v in value]
    return value
