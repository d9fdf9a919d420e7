"""What every interop client script shares (each runs in its own venv; stdlib only here).

A client script calls :func:`report` with the distribution to name and a coroutine function
returning ``{"state": ..., "answer": ...}``; one JSON line goes to stdout: those keys plus
``version``, or ``{"version", "error"}`` (exit status 1) when the call raised.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

TEXT = "Count the words in this: The cat sat on the mat. It was warm."


def report(distribution: str, call: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
    """Run ``call(url)`` (URL from argv[1]) and print its result as one JSON line."""
    out: dict[str, Any] = {"version": version(distribution)}
    try:
        out.update(asyncio.run(asyncio.wait_for(call(sys.argv[1]), 120)))
    except Exception as exc:  # the table shows it; the driver goes on with the next client
        out["error"] = f"{type(exc).__name__}: {exc}"[:500]
    print(json.dumps(out, default=str), flush=True)
    sys.exit(1 if "error" in out else 0)
