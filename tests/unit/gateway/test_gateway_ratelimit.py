"""Per-client token buckets: burst, refill, the wait a refused request is told, bounded memory."""

from __future__ import annotations

import pytest

from services.gateway.ratelimit import TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_average_rate() -> None:
    clock = Clock()
    buckets = TokenBuckets(2.0, 3, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)  # one token takes 1/2 s at 2 per second
    assert buckets.take("b") == 0.0  # another client has its own bucket
    clock.now += 0.5
    assert buckets.take("a") == 0.0
    assert buckets.take("a") > 0
    clock.now += 100  # refills to the burst, not beyond
    assert [buckets.take("a") for _ in range(4)][-1] > 0


def test_memory_is_bounded_by_forgetting_the_least_recent_clients() -> None:
    buckets = TokenBuckets(1.0, 1, clock=Clock(), max_clients=2)
    for key in ("a", "b", "c"):
        buckets.take(key)
    assert len(buckets) == 2
    assert buckets.take("a") == 0.0  # forgotten: starts full again
    assert buckets.take("c") > 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        TokenBuckets(0, 1)
    with pytest.raises(ValueError):
        TokenBuckets(1, 0)
