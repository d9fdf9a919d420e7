"""The exception tree of a2a-node.

Every error the node raises on purpose derives from :class:`NodeError`::

    NodeError
    ├── ConfigError            a card or setting is invalid (file, path, what was expected)
    ├── ToolError              a tool call cannot run or failed; becomes an error *result*
    │   ├── ToolNotFound           not_found           no tool of that name
    │   ├── BadArguments           bad_arguments       not a JSON object
    │   ├── InvalidArguments       invalid_arguments   an object that fails the tool's schema
    │   ├── CapabilityMissing      capability_missing  the caller lacks a required capability
    │   ├── BudgetExceeded         budget_exceeded     the task's cost budget is spent
    │   │   └── CostLimitExceeded  model usage would exceed it (also a PlanningError)
    │   ├── ToolTimeout            timeout             the call or the task's deadline ran out
    │   ├── GuardError             guard               a path or URL was refused by a guard
    │   ├── PeerError              peer                a peer was unreachable, failed, rejected
    │   ├── HopLimitExceeded       hop_limit           a forwarded call would loop or go too far
    │   └── ToolExecutionError     execution           the tool itself failed
    ├── RegistryError          the registry refused or could not do something
    │   └── …                  (node.registry.errors, with its own HTTP table)
    ├── PlanningError          a planner could not turn a request into calls
    │   ├── UnknownSkill           the request names a skill this node does not publish
    │   ├── NoSkillNamed           the request names no skill
    │   ├── InvalidRequest         the request has an unusable shape
    │   ├── StepLimitExceeded      the model wanted tools after its last step
    │   ├── ToolCallLimitExceeded  the model asked for too many calls
    │   ├── PlanningTimeout        no answer within the planner's time
    │   ├── CostLimitExceeded      (see BudgetExceeded)
    │   └── ProviderError          the model endpoint failed
    ├── StoreError             the task store failed
    ├── CliError               a command-line error (node.cli.common)
    ├── RemoteError            a node or registry the CLI talked to failed (node.cli.common)
    └── LaunchError            a local network could not be started (node.network.launcher)

Each :class:`ToolError` class has its own :class:`ErrorKind` (a class attribute; one class per
kind, see :data:`TOOL_ERRORS`). A :class:`ToolError` is a result for the caller (the planner or a
remote agent), never a crash of the node: the runner turns it into an error result whose ``kind``
is stable and machine-readable.

:class:`node.planning.InputNeeded` is not an error: it is the planner's signal that the caller
must say more (``NeedsInput``: missing arguments; ``NeedsChoice``: which skill), outside the tree.

The planning classes live in :mod:`node.planning` (``direct``, ``text``, ``llm``,
``providers.base``).
:data:`node.executor.TASK_OUTCOMES` is the one table from each class to the outcome of a task it
stops (rejected, failed or input-required) and its wire code.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import ClassVar


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
    """A tool call could not run or failed; reported to the caller as an error result.

    Abstract: raise the subclass of the failure's kind (:class:`ToolExecutionError` when the tool
    itself failed).
    """

    kind: ClassVar[ErrorKind]

    def __init__(self, message: str) -> None:
        if type(self) is ToolError:
            raise TypeError("ToolError is abstract; raise the subclass of the failure's kind")
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self)


class ToolNotFound(ToolError):
    kind = ErrorKind.NOT_FOUND


class BadArguments(ToolError):
    kind = ErrorKind.BAD_ARGUMENTS


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


class HopLimitExceeded(ToolError):
    kind = ErrorKind.HOP_LIMIT


class ToolExecutionError(ToolError):
    kind = ErrorKind.EXECUTION


#: The one :class:`ToolError` class of each kind.
TOOL_ERRORS: Mapping[ErrorKind, type[ToolError]] = {
    cls.kind: cls
    for cls in (
        ToolNotFound,
        BadArguments,
        InvalidArguments,
        CapabilityMissing,
        BudgetExceeded,
        ToolTimeout,
        GuardError,
        PeerError,
        HopLimitExceeded,
        ToolExecutionError,
    )
}


def tool_error(kind: ErrorKind | None, message: str) -> ToolError:
    """The error of ``kind``'s class (an execution error when no kind is known)."""
    return TOOL_ERRORS[kind or ErrorKind.EXECUTION](message)


class RegistryError(NodeError):
    """The registry refused a request or could not complete it."""


class PlanningError(NodeError):
    """A planner could not turn a request into tool calls."""


class StoreError(NodeError):
    """The task store failed."""
