"""Tools that wait for the test to open a gate, so a CLI is seen following a task still running."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from node.errors import ToolExecutionError
from node.tooling import tool

GATES: dict[str, asyncio.Event] = {}


@tool(read_only=True)
async def gate(name: str) -> str:
    """Wait until the test opens the gate, then say so.

    Args:
        name: The gate to wait for.
    """
    await asyncio.wait_for(GATES[name].wait(), timeout=30)
    return f"{name} opened"


@tool(read_only=True)
async def gate_then_fail(name: str) -> str:
    """Wait until the test opens the gate, then fail.

    Args:
        name: The gate to wait for.
    """
    await asyncio.wait_for(GATES[name].wait(), timeout=30)
    raise ToolExecutionError(f"the {name} gauge broke")


@contextlib.asynccontextmanager
async def gated(name: str) -> AsyncIterator[asyncio.Event]:
    """A gate for the block (opened at its end, whatever happened)."""
    GATES[name] = asyncio.Event()
    try:
        yield GATES[name]
    finally:
        GATES.pop(name).set()
