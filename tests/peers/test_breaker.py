from __future__ import annotations

from node.peers.breaker import CircuitBreaker


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tripped(clock: FakeClock, failures: int = 3, cooldown: float = 10.0) -> CircuitBreaker:
    breaker = CircuitBreaker(failures, cooldown, clock)
    for _ in range(failures):
        assert breaker.acquire()
        breaker.record_failure()
    return breaker


def test_closed_until_n_consecutive_failures() -> None:
    breaker = CircuitBreaker(3, 10.0, FakeClock())
    breaker.record_failure()
    breaker.record_failure()
    breaker.record_success()  # resets the count
    breaker.record_failure()
    breaker.record_failure()
    assert breaker.state == "closed"
    assert breaker.acquire()
    breaker.record_failure()
    assert breaker.state == "open"
    assert not breaker.acquire()


def test_open_breaker_says_when_to_retry() -> None:
    clock = FakeClock()
    breaker = tripped(clock)
    clock.now += 4
    assert breaker.retry_after() == 6.0
    assert not breaker.acquire()


def test_half_open_allows_one_trial_and_success_closes() -> None:
    clock = FakeClock()
    breaker = tripped(clock)
    clock.now += 10
    assert breaker.state == "half_open"
    assert breaker.acquire()  # the trial
    assert not breaker.acquire()  # everyone else waits for it
    breaker.record_success()
    assert breaker.state == "closed"
    assert breaker.acquire()


def test_failed_trial_reopens_for_a_full_cooldown() -> None:
    clock = FakeClock()
    breaker = tripped(clock)
    clock.now += 10
    assert breaker.acquire()
    breaker.record_failure()
    assert breaker.state == "open"
    assert breaker.retry_after() == 10.0


def test_a_trial_that_never_reports_does_not_stick() -> None:
    clock = FakeClock()
    breaker = tripped(clock)
    clock.now += 10
    assert breaker.acquire()  # trial cancelled: neither success nor failure recorded
    clock.now += 10
    assert breaker.acquire()
