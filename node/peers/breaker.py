"""A per-peer circuit breaker: closed → open after N consecutive failures → half-open.

After the cool-down one trial call goes through (half-open); its success closes the breaker, its
failure re-opens it for another cool-down. A trial that never reports (it was cancelled) frees
the way for a new trial after one more cool-down, so the breaker never sticks.

Why not aiobreaker/pybreaker: they wrap calls, fit asyncio poorly and count every exception,
while here only "the peer did not answer" counts. Forty lines with an injectable clock do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

__all__ = ["CircuitBreaker"]

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """Counts consecutive failures of one peer; :meth:`acquire` says whether to call it."""

    def __init__(
        self,
        failures: int = 5,
        cooldown_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold, self.cooldown_s, self._clock = failures, cooldown_s, clock
        self._failures = 0
        self._opened_at: float | None = None  # set while open or half-open
        self._trial = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        return "half_open" if self._trial or self.retry_after() == 0 else "open"

    def retry_after(self) -> float:
        """Seconds until the next trial call is allowed (0 when a call may go now)."""
        if self._opened_at is None:
            return 0.0
        return max(0.0, self._opened_at + self.cooldown_s - self._clock())

    def acquire(self) -> bool:
        """True when a call may go: closed, or the single trial of a half-open breaker."""
        if self._opened_at is None:
            return True
        if self.retry_after() > 0:
            return False
        self._opened_at, self._trial = self._clock(), True  # the trial; others wait a cool-down
        return True

    def record_success(self) -> None:
        self._failures, self._opened_at, self._trial = 0, None, False

    def record_failure(self) -> None:
        self._failures += 1
        if self._trial or self._failures >= self.threshold:
            self._opened_at, self._trial = self._clock(), False
