"""Running the ``a2a-node`` CLI as a real subprocess, and reading what long-running ones print."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARDS = ROOT / "cards"
DATA_CARD = str(CARDS / "data.yaml")
CLI = (sys.executable, "-m", "node.cli")


async def cli(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60.0,
) -> tuple[int, str, str]:
    """Run ``a2a-node ARGS`` to its end: ``(exit code, stdout, stderr)``."""
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


class Running:
    """A long-running CLI process (``serve``, ``up``) whose output is read as it comes."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.out: list[str] = []
        self.err: list[str] = []

    async def wait_for_line(
        self, needle: str, *, stream: str = "out", timeout: float = 30.0
    ) -> str:
        """The first line of stdout (or stderr) containing ``needle``; fail at the deadline."""
        reader = self.proc.stdout if stream == "out" else self.proc.stderr
        lines = self.out if stream == "out" else self.err
        assert reader is not None
        deadline = time.monotonic() + timeout
        for line in lines:
            if needle in line:
                return line
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line with {needle!r}; {stream} so far:\n{''.join(lines)}")
            try:
                raw = await asyncio.wait_for(reader.readline(), timeout=left)
            except TimeoutError:
                continue
            if not raw:
                raise AssertionError(f"exited before printing {needle!r}:\n{''.join(lines)}")
            line = raw.decode()
            lines.append(line)
            if needle in line:
                return line

    async def stop(self) -> int:
        """Ctrl-C, then wait (kill after 10 s); the exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout=10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        assert self.proc.returncode is not None
        return self.proc.returncode


@contextlib.asynccontextmanager
async def running(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[Running]:
    """``a2a-node ARGS`` in the background for the block; stopped (Ctrl-C) at its end."""
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    run = Running(proc)
    try:
        yield run
    finally:
        await run.stop()
