"""Keep the garbage collector's full collections short: freeze the heap a node starts with.

A node imports a large object graph (the SDK, protobuf, pydantic, uvicorn, the tools). Every
collection of generation 2 walks all of it: measured on the benchmark node, 100–265 ms per full
collection (a few per 10 s under load), which was the whole p99 tail of the lean path. Once the
node has started, :func:`freeze_startup_heap` collects once and moves every surviving object to
the permanent generation (``gc.freeze()``); later full collections see only objects created
while serving (2–3 ms measured). Done once per process: later app starts in the same process
(tests) change nothing.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_startup_heap() -> bool:
    """Collect, then freeze what survived; True the first time in this process."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    return True
