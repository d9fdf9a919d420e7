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


def test_the_tooling_surface_is_small_and_pinned():
    import node.tooling

    assert node.tooling.__all__ == sorted(node.tooling.__all__)
    assert set(node.tooling.__all__) == {
        "CombinedCatalog",
        "FilteredCatalog",
        "FunctionTool",
        "PreparedCall",
        "ProgressCallback",
        "Tool",
        "ToolCall",
        "ToolCatalog",
        "ToolContext",
        "ToolDefinition",
        "ToolPolicy",
        "ToolResult",
        "ToolRunner",
        "Toolbox",
        "run_in_process",
        "tool",
    }
    for name in node.tooling.__all__:
        assert getattr(node.tooling, name) is not None
