"""The exception tree of a2a-node.

Every error the node raises on purpose derives from :class:`NodeError`::

    NodeError
    ├── ConfigError            a card or setting is invalid (file, path, what was expected)
    ├── ToolError              a tool call cannot run or failed; becomes an error *result*
    │   ├── ToolNotFound
    │   ├── InvalidArguments
    │   ├── CapabilityMissing
    │   ├── BudgetExceeded
    │   ├── ToolTimeout
    │   ├── GuardError         a path or URL was refused by a guard
    │   └── PeerError          a peer was unreachable, failed, rejected or timed out
    ├── RegistryError          the registry refused or could not do something
    ├── PlanningError          a planner could not turn a request into calls
    └── StoreError             the task store failed

A :class:`ToolError` is a result for the caller (the planner or a remote agent), never a crash of
the node: the runner turns it into an error result whose ``kind`` is stable and machine-readable.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """Stable, typed kinds of tool-call failures (callers branch on these, not on text)."""

    NOT_FOUND = "not_found"
    BAD_ARGUMENTS = "bad_arguments"  # not a JSON object (array, scalar, malformed JSON)
    INVALID_ARGUMENTS = "invalid_arguments"  # an object that fails the tool's schema
    CAPABILITY_MISSING = "capability_missing"
    BUDGET_EXCEEDED = "budget_exceeded"
    TIMEOUT = "timeout"
    GUARD = "guard"  # path or URL refused by a guard
    PEER = "peer"  # a remote agent failed, rejected, timed out or was unreachable
    HOP_LIMIT = "hop_limit"  # a forwarded call would loop, exceed hops or its deadline
    EXECUTION = "execution"  # the tool raised


class NodeError(Exception):
    """Root of every error a2a-node raises on purpose."""


class ConfigError(NodeError):
    """A card, setting or environment variable is invalid."""


class ToolError(NodeError):
    """A tool call could not run or failed; reported to the caller as an error result."""

    kind: ErrorKind = ErrorKind.EXECUTION

    def __init__(self, message: str, *, kind: ErrorKind | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind

    @property
    def message(self) -> str:
        return str(self)


class ToolNotFound(ToolError):
    kind = ErrorKind.NOT_FOUND


class InvalidArguments(ToolError):
    kind = ErrorKind.INVALID_ARGUMENTS


class CapabilityMissing(ToolError):
    kind = ErrorKind.CAPABILITY_MISSING


class BudgetExceeded(ToolError):
    kind = ErrorKind.BUDGET_EXCEEDED


class ToolTimeout(ToolError):
    kind = ErrorKind.TIMEOUT


class GuardError(ToolError):
    kind = ErrorKind.GUARD


class PeerError(ToolError):
    kind = ErrorKind.PEER


class RegistryError(NodeError):
    """The registry refused a request or could not complete it."""


class PlanningError(NodeError):
    """A planner could not turn a request into tool calls."""


class StoreError(NodeError):
    """The task store failed."""
