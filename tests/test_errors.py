"""The error tree is drawn whole, one class per ErrorKind, one table gives each task outcome."""

from __future__ import annotations

import importlib
import re

import pytest

import node.errors
from node.errors import TOOL_ERRORS, ErrorKind, NodeError, ToolError, tool_error
from node.executor import TASK_OUTCOMES, Outcome, task_outcome
from node.planning import NeedsInput

# every module that defines a NodeError subclass
_MODULES = (
    "node.errors",
    "node.planning.direct",
    "node.planning.text",
    "node.planning.llm",
    "node.planning.providers.base",
    "node.registry.errors",
    "node.cli.common",
    "node.network.launcher",
)
# the task path: these classes must each have their own row in the table
_TASK_MODULES = _MODULES[:5]


def _subclasses(root: type) -> set[type]:
    found: set[type] = set()
    stack = [root]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in found and sub.__module__.startswith("node."):
                found.add(sub)
                stack.append(sub)
    return found


@pytest.fixture(scope="module")
def every_error() -> set[type]:
    for name in _MODULES:
        importlib.import_module(name)
    return _subclasses(NodeError)


def test_the_table_gives_every_task_error_its_own_outcome(every_error: set[type]) -> None:
    task_path = {c for c in every_error if c.__module__ in _TASK_MODULES}
    assert task_path, "no error classes found"
    missing = sorted(c.__qualname__ for c in task_path if c not in TASK_OUTCOMES)
    assert missing == []


def test_every_error_resolves_to_an_outcome(every_error: set[type]) -> None:
    for cls in every_error | {NodeError}:
        assert cls in TASK_OUTCOMES or any(base in TASK_OUTCOMES for base in cls.__mro__), cls


def test_needs_input_is_a_signal_outside_the_tree() -> None:
    assert not issubclass(NeedsInput, NodeError)
    need = NeedsInput("note", {}, ["title"], {})
    outcome = task_outcome(need)
    assert outcome is not None and outcome.state is Outcome.INPUT_REQUIRED


def test_every_error_kind_has_exactly_one_class(every_error: set[type]) -> None:
    own_kind = [c for c in every_error if issubclass(c, ToolError) and "kind" in vars(c)]
    kinds = sorted(c.kind for c in own_kind)
    assert kinds == sorted(ErrorKind)
    assert set(TOOL_ERRORS) == set(ErrorKind)
    for kind, cls in TOOL_ERRORS.items():
        assert cls.kind is kind
        assert type(tool_error(kind, "x")) is cls


def test_wire_codes_are_the_kinds_of_their_classes() -> None:
    for cls, outcome in TASK_OUTCOMES.items():
        if outcome.code is not None:
            assert issubclass(cls, ToolError) and cls.kind is outcome.code, cls


def test_tool_error_is_abstract() -> None:
    with pytest.raises(TypeError):
        ToolError("no kind")


def test_a_kind_cannot_be_overridden_per_instance() -> None:
    with pytest.raises(TypeError):
        TOOL_ERRORS[ErrorKind.EXECUTION]("x", kind=ErrorKind.GUARD)  # type: ignore[call-arg]


def test_the_docstring_tree_names_every_class(every_error: set[type]) -> None:
    doc = node.errors.__doc__ or ""
    registry_doc = importlib.import_module("node.registry.errors").__doc__ or ""
    for cls in every_error:
        tree = registry_doc if cls.__module__ == "node.registry.errors" else doc
        assert re.search(rf"[├└]── {cls.__name__}\b", tree), cls.__qualname__
