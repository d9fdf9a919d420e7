"""Fixtures for tests against another A2A implementation: a real a2a-sdk 0.3 in its own venv.

- ``legacy_python`` (session): ``Path`` to the python of a cached venv with
  ``a2a-sdk[http-server]<0.4`` and uvicorn (made once per machine by
  :mod:`tests.interop.legacy_sdk`; the test fails with pip's reason when the package index cannot
  be reached).
- ``legacy_server`` (per test): a factory starting ``legacy_server.py`` (a plain a2a-sdk 0.3 agent,
  skills ``echo`` and ``shout``, no a2a-node extension) on an ephemeral loopback port and returning
  its base URL; every server started is stopped when the test ends::

      url = legacy_server()                                  # answers with a completed Task
      url = legacy_server(reply="message", preferred="HTTP+JSON", bearer="s3cret")

  JSON-RPC is served at ``url + "/"`` and HTTP+JSON at ``url + "/rest"``; see that script's
  docstring for what it answers.

Fixtures in a ``conftest.py`` reach only the tests under its folder: tests using these live in
``tests/interop/``. Everything here is marked ``interop``.
"""

from __future__ import annotations

import selectors
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.interop.legacy_sdk import VenvError
from tests.interop.legacy_sdk import legacy_python as make_legacy_python

HERE = Path(__file__).parent
LEGACY_SERVER = HERE / "legacy_server.py"
START_TIMEOUT_S = 30.0

LegacyServer = Callable[..., str]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.interop)


@pytest.fixture(scope="session")
def legacy_python() -> Path:
    """The python of the cached a2a-sdk 0.3 venv."""
    try:
        return make_legacy_python()
    except VenvError as exc:
        pytest.fail(f"the a2a-sdk 0.3 environment could not be made: {exc}", pytrace=False)


def _read_ready_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The ``READY <url>`` line the script prints, within ``timeout`` seconds."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if selector.select(left):
                line = process.stdout.readline()
                if line.startswith("READY "):
                    return line.split()[1]
                if not line:  # the process ended
                    break
    code = process.poll()
    if code is not None:
        raise RuntimeError(f"legacy server exited with code {code} before it was ready")
    raise RuntimeError(f"legacy server not ready after {timeout}s")


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture
def legacy_server(legacy_python: Path, tmp_path: Path) -> Iterator[LegacyServer]:
    """``url = legacy_server(reply="task"|"message", preferred=..., bearer=..., streaming=...)``."""
    started: list[subprocess.Popen[str]] = []

    def start(
        reply: str = "task", preferred: str = "JSONRPC", bearer: str = "", streaming: bool = True
    ) -> str:
        command = [str(legacy_python), str(LEGACY_SERVER), "--port", "0"]
        command += ["--reply", reply, "--preferred", preferred]
        if bearer:
            command += ["--bearer", bearer]
        if not streaming:
            command.append("--no-streaming")
        log = tmp_path / f"legacy-server-{len(started)}.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        started.append(process)
        try:
            url = _read_ready_line(process, START_TIMEOUT_S)
        except RuntimeError as exc:
            _stop(process)
            raise RuntimeError(f"{exc}; its stderr:\n{log.read_text()[-3000:]}") from None
        response = httpx.get(f"{url}/.well-known/agent-card.json", timeout=5.0)
        response.raise_for_status()
        return url

    try:
        yield start
    finally:
        for process in started:
            _stop(process)
