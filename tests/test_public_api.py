"""The public surface of ``node`` is sorted, complete and importable."""

from __future__ import annotations

import pytest

import node


def test_all_is_sorted_and_every_name_resolves():
    assert node.__all__ == sorted(node.__all__)
    for name in node.__all__:
        assert getattr(node, name) is not None


def test_all_matches_the_lazy_export_table():
    assert set(node.__all__) == set(node._EXPORTS)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        node.no_such_name  # noqa: B018
