from __future__ import annotations

import node.tooling


def test_public_api_is_sorted_and_complete() -> None:
    exported = node.tooling.__all__
    assert exported == sorted(exported)
    assert all(hasattr(node.tooling, name) for name in exported)
    public = {
        name
        for name, value in vars(node.tooling).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("node.")
    }
    assert public <= set(exported)
