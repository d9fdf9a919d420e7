"""The public surface of ``node`` is sorted, complete and importable."""

from __future__ import annotations

import node


def test_all_is_sorted_and_every_name_resolves():
    assert node.__all__ == sorted(node.__all__)
    for name in node.__all__:
        assert getattr(node, name) is not None


def test_unknown_names_raise_attribute_error():
    try:
        node.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
