"""Module-level functions and tools for process-isolation tests (a worker imports them by name)."""

from __future__ import annotations

import os
import time

from node.errors import InvalidArguments
from node.tooling import tool


def spin() -> None:
    """Burn a core in pure Python, forever."""
    while True:
        pass


def pid() -> int:
    return os.getpid()


def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def die(code: int) -> None:
    os._exit(code)


def allocate(megabytes: int) -> int:
    return len(bytearray(megabytes * 1024 * 1024))


@tool(isolation="process", timeout=0.5)
def hog() -> None:
    """Loop forever in pure Python (the GIL is never released on purpose)."""
    spin()


@tool(isolation="process", timeout=0.5)
def wait_then_pid(seconds: float) -> int:
    """Sleep, then name the worker process.

    Args:
        seconds: How long to sleep.
    """
    return pid_after(seconds)


@tool(isolation="process")
def square(x: int) -> int:
    """Square a number in a worker process.

    Args:
        x: The number.
    """
    return x * x


@tool(isolation="process")
def refuse(word: str) -> str:
    """Fail the way a tool reports bad input.

    Args:
        word: Any word.
    """
    raise InvalidArguments(f"{word} is not welcome")


@tool(isolation="process")
def crash() -> None:
    """Exit the worker process abruptly."""
    die(3)
