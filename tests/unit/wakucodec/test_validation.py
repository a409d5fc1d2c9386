"""Envelope validation on receipt (status-go ``waku/waku.go`` ``add``): each fault, the order of the checks,
tolerance, the future-PoW rule and Go's uint32 wrap-around."""

from __future__ import annotations

import pytest

from wakucodec.bloom import topic_to_bloom, topics_to_bloom
from wakucodec.constants import UINT32_MAX
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import calculate_pow, seal
from wakucodec.validation import AcceptancePolicy, EnvelopeFault, check_envelope

NOW = 1_700_000_000
Fault = EnvelopeFault


def envelope(*, topic: bytes = b"abcd", size: int = 64, ttl: int = 100, sent: int = NOW) -> Envelope:
    """An unsealed envelope; PoW >= 2^0/len/ttl."""
    return make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=b"\x07" * size)


def sealed(*, pow_target: float) -> Envelope:
    """An envelope mined to ``pow_target``."""
    return seal(NOW + 100, 100, b"abcd", b"\x01" * 32, target_pow=pow_target, work_time_s=10)


FULL = AcceptancePolicy(max_message_size=1024, min_pow=0.0, min_pow_tolerance=0.0)


@pytest.mark.parametrize(
    ("sent_offset", "ttl", "fault"),
    [
        (11, 100, Fault.IN_FUTURE),  # sent more than 10 s ahead
        (10, 100, None),  # exactly at the allowance: accepted
        (-121, 100, Fault.VERY_OLD),  # expired 21 s ago
        (-120, 100, Fault.EXPIRED),  # expired 20 s ago: dropped silently
        (-101, 100, Fault.EXPIRED),
        (-100, 100, None),  # Expiry == now is not expired (Expiry < now is)
    ],
)
def test_time_checks(sent_offset: int, ttl: int, fault: Fault | None) -> None:
    env = envelope(sent=NOW + sent_offset, ttl=ttl)
    verdict = check_envelope(env, NOW, FULL)
    assert verdict.fault is fault
    if fault is not None:
        assert fault.time_sync == (fault in (Fault.IN_FUTURE, Fault.VERY_OLD))
        assert fault.silent == (fault is Fault.EXPIRED)
        assert bool(verdict.message) == (fault is not Fault.EXPIRED)


def test_future_envelope_pow_is_time_adjusted() -> None:
    env = envelope(sent=NOW + 5, ttl=100)
    verdict = check_envelope(env, NOW, FULL)
    assert verdict.ok and verdict.pow == calculate_pow(env, diff=6)  # sent - now + 1
    assert check_envelope(envelope(ttl=100), NOW, FULL).pow == calculate_pow(envelope(ttl=100))


def test_oversized_uses_go_size() -> None:
    small = AcceptancePolicy(max_message_size=20 + 64, min_pow=0.0, min_pow_tolerance=0.0)
    assert check_envelope(envelope(size=64), NOW, small).ok
    assert check_envelope(envelope(size=68), NOW, small).fault is Fault.OVERSIZED


def test_low_pow_and_tolerance() -> None:
    env = sealed(pow_target=0.5)
    pow_value = calculate_pow(env)
    strict = AcceptancePolicy(max_message_size=1024, min_pow=pow_value * 2, min_pow_tolerance=pow_value * 2)
    assert check_envelope(env, NOW, strict).fault is Fault.LOW_POW
    tolerant = AcceptancePolicy(max_message_size=1024, min_pow=pow_value * 2, min_pow_tolerance=pow_value)
    assert check_envelope(env, NOW, tolerant).ok


def test_bloom_and_topic_interest() -> None:
    bloom = topics_to_bloom([b"abcd", b"efgh"])
    policy = AcceptancePolicy(max_message_size=1024, min_pow=0.0, min_pow_tolerance=0.0, bloom=bloom)
    assert not policy.full_node
    assert check_envelope(envelope(topic=b"abcd"), NOW, policy).ok
    assert check_envelope(envelope(topic=b"zzzz"), NOW, policy).fault is Fault.NO_BLOOM_MATCH
    tolerated = AcceptancePolicy(
        max_message_size=1024,
        min_pow=0.0,
        min_pow_tolerance=0.0,
        bloom=bloom,
        bloom_tolerance=topic_to_bloom(b"zzzz"),
    )
    assert check_envelope(envelope(topic=b"zzzz"), NOW, tolerated).ok
    interest = AcceptancePolicy(
        max_message_size=1024,
        min_pow=0.0,
        min_pow_tolerance=0.0,
        bloom=topic_to_bloom(b"zzzz"),  # ignored: topic interest takes precedence
        topic_interest=frozenset({b"abcd"}),
        topic_interest_tolerance=frozenset({b"old!"}),
    )
    assert check_envelope(envelope(topic=b"abcd"), NOW, interest).ok
    assert check_envelope(envelope(topic=b"old!"), NOW, interest).ok
    assert check_envelope(envelope(topic=b"zzzz"), NOW, interest).fault is Fault.NO_TOPIC_INTEREST_MATCH


def test_full_node_accepts_every_topic() -> None:
    assert FULL.full_node
    assert all(check_envelope(envelope(topic=t), NOW, FULL).ok for t in (b"\x00" * 4, b"\xff" * 4, b"abcd"))


def test_order_time_before_size_before_pow() -> None:
    huge_old = envelope(sent=NOW - 500, size=4096, ttl=100)
    assert check_envelope(huge_old, NOW, FULL).fault is Fault.VERY_OLD
    strict = AcceptancePolicy(max_message_size=64, min_pow=1e9, min_pow_tolerance=1e9)
    assert check_envelope(envelope(size=4096), NOW, strict).fault is Fault.OVERSIZED


def test_sent_minus_allowance_wraps_like_go_uint32() -> None:
    # sent = 5 against now = 0: Go's `sent - DefaultSyncAllowance` wraps to 2**32 - 5 > now → from the future.
    env = make_envelope(expiry=105, ttl=100, topic=b"abcd", data=b"x")
    assert check_envelope(env, 0, FULL).fault is Fault.IN_FUTURE
    assert check_envelope(env, 1, FULL).fault is Fault.IN_FUTURE  # 5 - 10 still wraps
    assert check_envelope(env, 5, FULL).ok


def test_expiry_plus_twice_the_allowance_wraps_like_go_uint32() -> None:
    # Expiry near the top of uint32: `Expiry + 20` wraps to a small number < now → very old, not expired.
    expiry = UINT32_MAX - 5
    env = make_envelope(expiry=expiry, ttl=100, topic=b"abcd", data=b"x")
    assert check_envelope(env, UINT32_MAX, FULL).fault is Fault.VERY_OLD
    assert check_envelope(env, expiry + 1, FULL).fault is Fault.VERY_OLD
    no_wrap = make_envelope(expiry=UINT32_MAX - 30, ttl=100, topic=b"abcd", data=b"x")
    assert check_envelope(no_wrap, UINT32_MAX - 10, FULL).fault is Fault.EXPIRED


def test_now_is_truncated_to_uint32_seconds() -> None:
    env = envelope(sent=NOW + 10)
    assert check_envelope(env, NOW + 0.999, FULL).ok
    assert check_envelope(env, NOW - 0.5, FULL).fault is Fault.IN_FUTURE  # int(-0.5 + NOW) = NOW - 1


def test_default_sync_allowance_is_the_status_go_constant() -> None:
    policy = AcceptancePolicy(max_message_size=1024, min_pow=0.0, min_pow_tolerance=0.0)
    assert policy.sync_allowance == 10
    wide = AcceptancePolicy(max_message_size=1024, min_pow=0.0, min_pow_tolerance=0.0, sync_allowance=30)
    assert check_envelope(envelope(sent=NOW + 30), NOW, wide).ok
    assert check_envelope(envelope(sent=NOW + 30), NOW, policy).fault is Fault.IN_FUTURE
