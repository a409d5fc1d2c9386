"""Validation: status-go's checks, their order and their exact boundaries (protocol-notes §1.5), plus ours."""

from __future__ import annotations

import pytest

from services.ingest.model import Fault
from services.ingest.validation import Invalid, Rules, Valid, check, validate
from wakucodec import rlp
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow

NOW = 1_700_000_000
TOPIC = bytes.fromhex("01020304")
OPEN = Rules(min_pow=0.0)  # no PoW floor: isolates the other rules


def env(
    *, sent: int = NOW, ttl: int = 120, data: bytes = b"\x01" * 32, topic: bytes = TOPIC, nonce: int = 0
) -> Envelope:
    return make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=nonce)


def fault(result: Valid | Invalid) -> Fault | None:
    return result.fault if isinstance(result, Invalid) else None


# ------------------------------------------------------------------------------------------ time checks


@pytest.mark.parametrize(
    ("ahead", "expected"),
    [(0, None), (1, None), (9, None), (10, None), (11, Fault.IN_FUTURE), (3600, Fault.IN_FUTURE)],
)
def test_in_future_boundary_is_sent_minus_allowance(ahead: int, expected: Fault | None) -> None:
    # status-go: `sent - DefaultSyncAllowance > now` is the error, so now + 10 passes and now + 11 does not.
    assert fault(check(env(sent=NOW + ahead), NOW, OPEN)) is expected


def test_in_future_follows_the_configured_allowance() -> None:
    rules = Rules(min_pow=0.0, sync_allowance_s=30)
    assert fault(check(env(sent=NOW + 30), NOW, rules)) is None
    assert fault(check(env(sent=NOW + 31), NOW, rules)) is Fault.IN_FUTURE


@pytest.mark.parametrize(
    ("expired_ago", "expected"),
    [
        (-1, None),  # expiry = now + 1
        (0, None),  # expiry == now: `Expiry < now` is false, still valid
        (1, Fault.EXPIRED),
        (19, Fault.EXPIRED),
        (20, Fault.EXPIRED),  # expiry + 20 == now: not `< now`, so dropped silently (expired), not very old
        (21, Fault.VERY_OLD),
        (86_400, Fault.VERY_OLD),
    ],
)
def test_expired_and_very_old_boundaries(expired_ago: int, expected: Fault | None) -> None:
    ttl = 60
    envelope = env(sent=NOW - expired_ago - ttl, ttl=ttl)
    assert envelope.expiry == NOW - expired_ago
    assert fault(check(envelope, NOW, OPEN)) is expected


def test_a_wrapped_sent_time_is_in_the_future_as_in_go() -> None:
    # TTL > Expiry: Go's uint32 subtraction wraps to a huge sent time.
    envelope = make_envelope(expiry=100, ttl=200, topic=TOPIC, data=b"x")
    assert envelope.sent > NOW
    assert fault(check(envelope, NOW, OPEN)) is Fault.IN_FUTURE


# ------------------------------------------------------------------------------------------ size


def test_oversized_is_20_plus_data_above_the_maximum() -> None:
    rules = Rules(min_pow=0.0, max_message_size=1000)
    assert fault(check(env(data=b"\x00" * 980), NOW, rules)) is None  # 20 + 980 == 1000
    result = check(env(data=b"\x00" * 981), NOW, rules)
    assert fault(result) is Fault.OVERSIZED
    assert isinstance(result, Invalid) and "1000" in result.detail


# ------------------------------------------------------------------------------------------ PoW


def test_low_pow_compares_with_the_minimum() -> None:
    candidate = env()
    pow0 = calculate_pow(candidate)
    assert fault(check(candidate, NOW, Rules(min_pow=pow0))) is None  # equal is enough: `PoW < MinPow` fails
    result = check(candidate, NOW, Rules(min_pow=pow0 * 1.0001))
    assert fault(result) is Fault.LOW_POW
    assert isinstance(result, Invalid) and "below the minimum" in result.detail


def test_future_sent_recomputes_pow_with_diff() -> None:
    # sent = now + 5: status-go recomputes the PoW with diff = sent - now + 1 = 6, a larger divisor.
    candidate = env()
    pow0 = calculate_pow(candidate)
    pow_future = calculate_pow(candidate, 6)
    assert pow_future < pow0
    floor = (pow0 + pow_future) / 2
    rules = Rules(min_pow=floor)
    assert fault(check(candidate, candidate.sent, rules)) is None  # not in the future: diff 0
    assert fault(check(candidate, candidate.sent - 5, rules)) is Fault.LOW_POW
    # The stored PoW is always the diff = 0 one (protocol-notes §1.3), even when the check used the diff.
    lenient = check(candidate, candidate.sent - 5, Rules(min_pow=0.0))
    assert isinstance(lenient, Valid) and lenient.pow == pow0


def test_status_go_default_minimum_accepts_ordinary_status_envelopes() -> None:
    # 1 KiB of data, TTL 120, no mining: PoW >= 1 / (len(short) * 120) ~ 8e-6 > 2e-6 (node default).
    result = check(env(data=b"\xab" * 1024), NOW, Rules())
    assert isinstance(result, Valid)


# ------------------------------------------------------------------------------------------ allow-list


def test_topic_allow_list() -> None:
    other = bytes.fromhex("0a0b0c0d")
    rules = Rules(min_pow=0.0, topic_allowlist=frozenset({TOPIC}))
    assert fault(check(env(topic=TOPIC), NOW, rules)) is None
    result = check(env(topic=other), NOW, rules)
    assert fault(result) is Fault.TOPIC_NOT_ALLOWED
    assert isinstance(result, Invalid) and "0x0a0b0c0d" in result.detail
    assert fault(check(env(topic=other), NOW, OPEN)) is None  # empty list: archive everything


# ------------------------------------------------------------------------------------------ order


def test_checks_run_in_status_go_order() -> None:
    strict = Rules(min_pow=1e9, max_message_size=100, topic_allowlist=frozenset({b"\xff" * 4}))
    big = b"\x00" * 200
    # Every rule broken at once: the first in status-go's order wins.
    assert fault(check(env(sent=NOW + 60, data=big), NOW, strict)) is Fault.IN_FUTURE
    assert fault(check(env(sent=NOW - 1000, ttl=60, data=big), NOW, strict)) is Fault.VERY_OLD
    assert fault(check(env(sent=NOW - 65, ttl=60, data=big), NOW, strict)) is Fault.EXPIRED
    assert fault(check(env(data=big), NOW, strict)) is Fault.OVERSIZED
    assert fault(check(env(), NOW, strict)) is Fault.LOW_POW
    assert fault(check(env(), NOW, Rules(min_pow=0, topic_allowlist=strict.topic_allowlist))) is (
        Fault.TOPIC_NOT_ALLOWED
    )


# ------------------------------------------------------------------------------------------ decoding


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x80",  # a string, not a list
        rlp.encode([1, 2, TOPIC, b"data"]),  # four items
        rlp.encode([1, 2, TOPIC, b"data", 0, 0]),  # six items
        rlp.encode([1, 2, b"\x01\x02\x03", b"data", 0]),  # three-byte topic
        rlp.encode([2**32, 2, TOPIC, b"data", 0]),  # expiry overflows uint32
        make_envelope(expiry=NOW + 60, ttl=60, topic=TOPIC, data=b"d").raw + b"\x00",  # trailing byte
    ],
)
def test_malformed_envelopes_are_rejected_with_their_raw_hash(raw: bytes) -> None:
    result = validate(raw, NOW, OPEN)
    assert isinstance(result, Invalid)
    assert result.fault is Fault.MALFORMED
    assert result.hash == keccak256(raw)
    assert len(result.detail.encode()) <= 256


def test_validate_decodes_and_checks() -> None:
    envelope = env()
    result = validate(envelope.raw, NOW, OPEN)
    assert isinstance(result, Valid)
    assert result.envelope.hash == envelope.hash == keccak256(envelope.raw)
    assert result.pow == calculate_pow(envelope)
    expired = validate(env(sent=NOW - 200, ttl=60).raw, NOW, OPEN)
    assert isinstance(expired, Invalid) and expired.fault is Fault.VERY_OLD


def test_size_is_judged_after_decoding_even_beyond_ten_mib() -> None:
    # A raw envelope above the 10 MiB hard cap still gets status-go's order: the time checks come first.
    huge = make_envelope(expiry=NOW - 1000, ttl=60, topic=TOPIC, data=b"\x00" * (10 * 1024 * 1024 + 1))
    assert fault(validate(huge.raw, NOW, OPEN)) is Fault.VERY_OLD
    fresh = make_envelope(expiry=NOW + 60, ttl=60, topic=TOPIC, data=b"\x00" * (10 * 1024 * 1024 + 1))
    assert fault(validate(fresh.raw, NOW, OPEN)) is Fault.OVERSIZED
