"""wakucodec.pow: published PoW vectors (protocol-notes §7.1), the future-sent rule (§1.5), and sealing
(§1.3)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wakucodec import pow as pow_mod
from wakucodec import rlp
from wakucodec.constants import SEAL_BATCH_SIZE, UINT32_MAX, UINT64_MAX
from wakucodec.envelope import Envelope, decode_envelope, make_envelope
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256
from wakucodec.pow import (
    PowTargetNotReached,
    calculate_pow,
    pow_hash,
    pow_to_first_bit,
    rlp_without_nonce,
    seal,
    validation_pow,
)

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPIC = bytes.fromhex("f26e7779")
DEADBEEF = bytes.fromhex("deadbeef")


def vector(nonce: int) -> Envelope:
    return make_envelope(expiry=0, ttl=1, topic=bytes(4), data=DEADBEEF, nonce=nonce)


def leading_zeros(digest: bytes) -> int:
    return 256 - int.from_bytes(digest, "big").bit_length()


def reference_lz(expiry: int, ttl: int, topic: bytes, data: bytes, nonce: int) -> int:
    return leading_zeros(keccak256(rlp.encode([expiry, ttl, topic, data]) + nonce.to_bytes(8, "big")))


def clock(*readings: float) -> Callable[[], float]:
    """A fake monotonic clock returning ``readings`` in order (then failing loudly)."""
    it: Iterator[float] = iter(readings)
    return lambda: next(it)


# --- published vectors -------------------------------------------------------------------------------


def test_short_rlp_of_the_vector() -> None:
    assert rlp_without_nonce(vector(100000)).hex() == "cc8001840000000084deadbeef"


@pytest.mark.parametrize(
    ("nonce", "pow_value", "hash_hex"),
    [
        (100000, 0.07692307692307693, "a788e02a95bfc673709e97ca81e39ca903bad5638d3388964c51eb64952172d6"),
        (276, 19.692307692307693, "00e2374c6353c243e4073e209a7f2acb2506522af318b3b78cf9a88310a2a11c"),
    ],
)
def test_published_pow_vectors(nonce: int, pow_value: float, hash_hex: str) -> None:
    for env in (vector(nonce), decode_envelope(vector(nonce).raw)):
        assert pow_hash(env).hex() == hash_hex
        assert calculate_pow(env) == pow_value  # exact float equality, as in the Go test


def test_vector_values_are_the_formula() -> None:
    assert calculate_pow(vector(100000)) == 1 / 13  # 0 leading zeros, len(short) = 13, TTL 1
    assert calculate_pow(vector(276)) == 2**8 / 13


# --- calculate_pow -----------------------------------------------------------------------------------

envelopes = st.builds(
    make_envelope,
    expiry=st.integers(min_value=0, max_value=UINT32_MAX),
    ttl=st.integers(min_value=1, max_value=UINT32_MAX),
    topic=st.binary(min_size=4, max_size=4),
    data=st.one_of(st.binary(max_size=60), st.binary(min_size=100, max_size=70000)),
    nonce=st.integers(min_value=0, max_value=UINT64_MAX),
)


@FAST
@given(envelopes)
def test_short_rlp_is_the_four_item_encoding(env: Envelope) -> None:
    assert rlp_without_nonce(env) == rlp.encode([env.expiry, env.ttl, env.topic, env.data])


@FAST
@given(envelopes, st.integers(min_value=0, max_value=100))
def test_calculate_pow_matches_reference(env: Envelope, diff: int) -> None:
    short = rlp.encode([env.expiry, env.ttl, env.topic, env.data])
    lz = reference_lz(env.expiry, env.ttl, env.topic, env.data, env.nonce)
    divisor = (env.ttl + diff) % 2**32
    expected = math.inf if divisor == 0 else 2.0**lz / len(short) / divisor
    assert calculate_pow(env, diff) == expected


def test_divisor_is_uint32_arithmetic() -> None:
    assert calculate_pow(vector(276), 1) == 2**8 / 13 / 2
    wraps = make_envelope(expiry=5, ttl=UINT32_MAX, topic=bytes(4), data=DEADBEEF, nonce=276)
    assert calculate_pow(wraps, 1) == math.inf  # uint32(TTL + 1) == 0 → Go divides by zero
    assert calculate_pow(wraps, 2) == 2.0 ** leading_zeros(pow_hash(wraps)) / len(rlp_without_nonce(wraps))
    zero_ttl = make_envelope(expiry=5, ttl=0, topic=bytes(4), data=DEADBEEF)
    assert calculate_pow(zero_ttl) == math.inf
    with pytest.raises(ValueError):
        calculate_pow(zero_ttl, -1)
    with pytest.raises(ValueError):
        calculate_pow(zero_ttl, UINT32_MAX + 1)


# --- validation_pow: envelopes sent in the future (§1.5) ---------------------------------------------

NOW = 1_700_000_000


@pytest.mark.parametrize(
    ("sent_offset", "diff"),
    [(-100, 0), (-1, 0), (0, 0), (1, 2), (5, 6), (10, 11), (50, 51)],  # diff = sent - now + 1 when sent > now
)
def test_validation_pow_future_rule(sent_offset: int, diff: int) -> None:
    ttl = 30
    env = make_envelope(expiry=NOW + sent_offset + ttl, ttl=ttl, topic=TOPIC, data=b"payload", nonce=7)
    assert env.sent == NOW + sent_offset
    assert validation_pow(env, NOW) == calculate_pow(env, diff)
    assert validation_pow(env, NOW + 0.999) == calculate_pow(env, diff)  # now is truncated like Unix()


def test_validation_pow_with_wrapped_sent_time() -> None:
    env = make_envelope(expiry=10, ttl=20, topic=TOPIC, data=b"x", nonce=3)  # sent = uint32(-10)
    assert validation_pow(env, NOW) == calculate_pow(env, (env.sent - NOW + 1) % 2**32)


# --- pow_to_first_bit --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "size", "ttl", "bits"),
    [
        (0.2, 24, 50, 8),  # 240 → log2 7.9 → 8
        (1.0, 32, 8, 8),  # exactly 256: Go's Log2 is exact for powers of two → 8, not 9
        (1.0, 33, 8, 9),  # 264
        (0.5, 2, 1, 1),  # log2(1) = 0 → minimum 1
        (0.000002, 100, 10, 1),  # tiny product → minimum 1
        (1.0, 24, 0, 1),  # TTL 0 → Log2(0) = -Inf → Go clamps to 1
        (2.0**196, 2**40, 2**20, 256),  # the largest target a 256-bit hash can meet (only by hash 0)
        (2.0**200, 2**40, 2**20, 260),
        (math.inf, 24, 50, 257),  # can never be met
    ],
)
def test_pow_to_first_bit(target: float, size: int, ttl: int, bits: int) -> None:
    assert pow_to_first_bit(target, size, ttl) == bits


def test_pow_to_first_bit_rejects_nan() -> None:
    with pytest.raises(ValueError):
        pow_to_first_bit(math.nan, 24, 50)


@FAST
@given(st.floats(min_value=1e-9, max_value=1e9), st.integers(20, 10**7), st.integers(1, 10**6))
def test_pow_to_first_bit_is_ceil_log2(target: float, size: int, ttl: int) -> None:
    x = target * size * ttl
    exact = math.log2(x)
    if abs(exact - round(exact)) > 1e-9:  # away from powers of two both log2 flavours agree
        assert pow_to_first_bit(target, size, ttl) == max(1, math.ceil(exact))


# --- sealing -----------------------------------------------------------------------------------------


def test_seal_reaches_the_target_with_the_first_qualifying_nonce() -> None:
    data = bytes(range(32))
    target_pow = 1.5  # 1.5 * 52 * 10 = 780 → 10 bits
    env = seal(NOW + 10, 10, TOPIC, data, target_pow=target_pow, work_time_s=30)
    bits = pow_to_first_bit(target_pow, env.size, 10)
    assert bits == 10
    assert leading_zeros(pow_hash(env)) >= bits
    assert calculate_pow(env) >= target_pow  # len(short) < size here, so the PoW clears the target
    assert decode_envelope(env.raw) == env
    assert (env.expiry, env.ttl, env.topic, env.data) == (NOW + 10, 10, TOPIC, data)
    # Go searches from nonce 0 upward and stops at the first hit.
    assert all(reference_lz(NOW + 10, 10, TOPIC, data, n) < bits for n in range(env.nonce))


@pytest.mark.parametrize("data_len", [0, 40, 1000, 70000])
def test_fast_and_plain_miners_agree(data_len: int) -> None:
    env = make_envelope(expiry=NOW, ttl=50, topic=TOPIC, data=bytes([7]) * data_len)
    short = rlp_without_nonce(env)
    deadline = time.monotonic() + 60
    fast = pow_mod._mine_fast(short, 11, deadline, time.monotonic)
    plain = pow_mod._mine_plain(short, 11, deadline, time.monotonic)
    assert fast == plain
    nonce, best, tried = fast
    assert best >= 11 and tried == nonce + 1
    assert best == leading_zeros(pow_hash(env.with_nonce(nonce)))


def test_seal_with_zero_target_does_not_mine() -> None:
    env = seal(NOW, 50, TOPIC, b"data", target_pow=0, work_time_s=5, now_fn=clock())  # clock never read
    assert env == make_envelope(expiry=NOW, ttl=50, topic=TOPIC, data=b"data", nonce=0)


def test_seal_gives_up_after_the_work_time_in_batches() -> None:
    # deadline = 0.0 + 1.0; the check before batch 1 reads 0.5 (go on), before batch 2 reads 1.5 (stop).
    with pytest.raises(PowTargetNotReached) as info:
        seal(NOW, 50, TOPIC, b"data", target_pow=1e30, work_time_s=1.0, now_fn=clock(0.0, 0.5, 1.5))
    err = info.value
    assert isinstance(err, CodecError)
    assert err.nonces_tried == SEAL_BATCH_SIZE
    assert err.target_bits == pow_to_first_bit(1e30, 24, 50)
    assert err.best_bits == max(reference_lz(NOW, 50, TOPIC, b"data", n) for n in range(SEAL_BATCH_SIZE))


def test_seal_impossible_target_is_bounded_in_real_time() -> None:
    started = time.monotonic()
    with pytest.raises(PowTargetNotReached):
        seal(NOW, 50, TOPIC, bytes(100), target_pow=1e60, work_time_s=0.05)
    assert time.monotonic() - started < 5


def test_seal_zero_work_time_mines_nothing() -> None:
    with pytest.raises(PowTargetNotReached) as info:
        seal(NOW, 50, TOPIC, b"data", target_pow=0.2, work_time_s=0, now_fn=clock(10.0, 10.0))
    assert info.value.nonces_tried == 0


def test_seal_target_above_256_bits_fails_at_once() -> None:
    with pytest.raises(PowTargetNotReached) as info:
        seal(NOW, 50, TOPIC, b"data", target_pow=math.inf, work_time_s=3600, now_fn=clock())
    assert info.value.target_bits == 257


def test_seal_negative_target_mines_for_the_work_time_and_extends_expiry() -> None:
    env = seal(NOW, 50, TOPIC, b"data", target_pow=-1, work_time_s=1.5, now_fn=clock(0.0, 0.1, 2.0))
    assert env.expiry == NOW + 2  # WorkTime is whole seconds in Go; 1.5 s rounds up
    lz = [reference_lz(NOW + 2, 50, TOPIC, b"data", n) for n in range(SEAL_BATCH_SIZE)]
    assert env.nonce == lz.index(max(lz))  # first nonce with the most leading zeros
    assert leading_zeros(pow_hash(env)) == max(lz)


@pytest.mark.parametrize("bad", [{"target_pow": math.nan}, {"ttl": UINT32_MAX + 1}, {"topic": b"abc"}])
def test_seal_rejects_bad_arguments(bad: dict[str, Any]) -> None:
    args: dict[str, Any] = {"expiry": NOW, "ttl": 50, "topic": TOPIC, "data": b"d", "target_pow": 0.2}
    with pytest.raises((ValueError, CodecError)):
        seal(**{**args, **bad}, work_time_s=1)
