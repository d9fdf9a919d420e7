"""Run the async tests on uvloop: ``pytest -p tests.uvloop_loop …``.

A pytest plugin: every async test and async fixture gets a uvloop event loop instead of the
default asyncio one, so the suites can be checked on the loop ``a2a-node serve`` runs on when
uvloop is installed. Without ``-p tests.uvloop_loop`` nothing changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {"uvloop": uvloop.new_event_loop}
