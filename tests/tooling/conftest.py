"""Every test ends with no worker process left running (the default pool is closed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from node.tooling.isolation import close_default_pool


@pytest.fixture(autouse=True)
def _no_worker_left() -> Iterator[None]:
    yield
    close_default_pool()
