"""Token buckets, the packet/byte limiter and the request limiter, on injected time (no sleeps)."""

from __future__ import annotations

import pytest

from wakunode.config import RateLimiterConfig
from wakunode.ratelimit import PacketRateLimiter, RequestRateLimiter, TokenBucket


def test_token_bucket_refills_continuously_and_spills_on_failure() -> None:
    bucket = TokenBucket(10, now=0.0)
    assert all(bucket.take(1, 0.0) for _ in range(10))
    assert not bucket.take(1, 0.0)
    assert bucket.take(1, 0.1)  # 0.1 s x 10/s = 1 token
    assert not bucket.take(1, 0.1)
    assert bucket.take(5, 1.0) and bucket.tokens == pytest.approx(4.0)  # 0.9 s refilled 9 after the spill
    assert not bucket.take(5, 1.0)  # not enough: the bucket spills (tsenart/tb Take)
    assert bucket.tokens == 0.0
    assert bucket.take(10, 100.0) and not bucket.take(0.5, 100.0)  # capped at capacity


def test_token_bucket_rejects_bad_rate() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, now=0.0)


def test_packet_limiter_per_peer_and_per_ip() -> None:
    limiter = PacketRateLimiter(
        RateLimiterConfig(packets_per_ip=3, packets_per_peer=2, bytes_per_ip=0, bytes_per_peer=0)
    )
    a, b = b"a" * 64, b"b" * 64
    limiter.register(a, "1.2.3.4", 0.0)
    limiter.register(b, "1.2.3.4", 0.0)
    assert limiter.check(a, "1.2.3.4", 10, 0.0) == (False, False)
    assert limiter.check(a, "1.2.3.4", 10, 0.0) == (False, False)
    assert limiter.check(a, "1.2.3.4", 10, 0.0) == (False, True)  # a's own budget of 2 is gone
    assert limiter.check(b, "1.2.3.4", 10, 0.0) == (True, False)  # the shared IP budget of 3 is gone
    assert limiter.check(b, "1.2.3.4", 10, 1.0) == (False, False)  # one second later: refilled
    assert limiter.tracked == (1, 2)
    limiter.unregister(a, "1.2.3.4")
    limiter.unregister(b, "1.2.3.4")
    assert limiter.tracked == (0, 0)


def test_byte_limits_and_whitelisted_ip() -> None:
    cfg = RateLimiterConfig(
        packets_per_ip=0,
        packets_per_peer=0,
        bytes_per_ip=100,
        bytes_per_peer=1000,
        whitelisted_ips=("9.9.9.9",),
    )
    limiter = PacketRateLimiter(cfg)
    peer = b"p" * 64
    limiter.register(peer, "1.1.1.1", 0.0)
    assert limiter.check(peer, "1.1.1.1", 100, 0.0) == (False, False)
    assert limiter.check(peer, "1.1.1.1", 1, 0.0) == (True, False)
    assert limiter.check(peer, "1.1.1.1", 2000, 5.0) == (True, True)  # bigger than either bucket
    other = b"o" * 64
    limiter.register(other, "9.9.9.9", 0.0)
    assert limiter.check(other, "9.9.9.9", 500, 0.0) == (False, False)


def test_request_limiter_status_go_rule() -> None:
    limiter = RequestRateLimiter(2.0)
    peer = b"x" * 64
    assert limiter.allow(peer, 10.0)
    assert not limiter.allow(peer, 11.0)
    assert not limiter.allow(peer, 12.0)  # allowed iff last + period < now (strict)
    assert limiter.allow(peer, 12.5)
    assert not limiter.allow(peer, 13.0)  # the refusal did not move the window; the allowed request did
    assert limiter.allow(b"y" * 64, 13.0)
    limiter.prune(14.0)
    assert len(limiter) == 2
    limiter.prune(20.0)
    assert len(limiter) == 0
    assert RequestRateLimiter(0).allow(peer, 0.0) and RequestRateLimiter(0).allow(peer, 0.0)


def test_request_limiter_prune_keeps_peers_with_unchecked_requests() -> None:
    limiter = RequestRateLimiter(1.0)
    waiting, idle = b"w" * 64, b"i" * 64
    assert limiter.allow(waiting, 10.0) and limiter.allow(idle, 10.0)
    limiter.prune(15.0, keep={waiting})  # a request of `waiting` received at 10.5 is still queued
    assert len(limiter) == 1
    assert not limiter.allow(waiting, 10.5)  # checked against its receipt time, later than that
