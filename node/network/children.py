"""One child process of a local network: spawned in its own process group, logged to a file.

``Child.start()`` spawns ``argv`` with stdout and stderr appended to ``log_path`` (never the
terminal) and stdin closed, as the leader of a new process group, so a terminal's Ctrl-C reaches
only the launcher and ``stop()`` reaches the child and anything it started: SIGTERM to the group,
a bounded wait, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["Child"]


class Child:
    """A named child process that can be started again after it exits."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name, self.argv, self.log_path = name, list(argv), log_path
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self.started_at = 0.0  # monotonic time of the last start
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    async def start(self) -> None:
        """Spawn the process (its previous run must have ended)."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- {time.strftime('%F %T')} start: {' '.join(self.argv)}\n".encode())
            log.flush()
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=self._env,
                cwd=self._cwd,
                process_group=0,
            )
        self.started_at = time.monotonic()
        self.starts += 1

    async def wait(self) -> int:
        """Wait until the process exits; its exit code (negative: killed by that signal)."""
        if self._proc is None:
            raise RuntimeError(f"{self.name} was never started")
        return await self._proc.wait()

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the child's whole process group (nothing if it is gone)."""
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signum)

    async def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM the group, wait up to ``timeout_s``, then SIGKILL it; the exit code."""
        if self._proc is None:
            return None
        if self._proc.returncode is None:
            self.signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout_s):
                    await self._proc.wait()
            except TimeoutError:
                pass
        self.signal(signal.SIGKILL)  # also sweeps anything the child left in its group
        return await self._proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the child's log file (for crash reports)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
