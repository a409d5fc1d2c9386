"""Envelope proof of work: checking and sealing (docs/protocol-notes.md §1.3, §1.5, §7.1).

The formula is the one of go-ethereum ≥ v1.9.0 (G920 ``whisper/whisperv6/envelope.go`` ``calculatePoW``,
``Seal``, ``powToFirstBit``) and of all status-go Waku code (SG ``waku/common/envelope.go``)::

    short = RLP([Expiry, TTL, Topic, Data])                 # the 4-item list, no nonce
    h     = keccak256(short ‖ nonce as 8 bytes big-endian)  # fixed-width suffix, not RLP
    lz    = 256 - bitlen(h)                                 # leading zero bits
    PoW   = 2**lz / len(short) / uint32(TTL + diff)         # float64, diff = 0 unless sent in the future

Not the pre-1.9 geth formula (``keccak(short) ‖ 24 zero bytes ‖ nonce``, divisor ``20 + len(Data)``) and not
Nim's (``20 + len(Data)`` as the divisor); see §9 item 1.

Sealing mines nonces from 0 upward. Each candidate hashes the same ``short`` prefix plus 8 bytes, so the
Keccak state after absorbing ``short`` is computed once and copied per nonce (pycryptodome's C
``keccak_copy``, reached through its cffi handle — the public ``Keccak_Hash`` object has no ``copy()``).
Without cffi the miner falls back to hashing ``short ‖ nonce`` from scratch, which is correct but much slower
for large payloads.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from wakucodec import rlp
from wakucodec.constants import SEAL_BATCH_SIZE, UINT32_MAX, UINT64_MAX
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256

try:  # pycryptodome internals, pinned in requirements.lock; optional (see _mine_plain)
    from Crypto.Hash.keccak import _raw_keccak_lib  # type: ignore[attr-defined]
    from Crypto.Util import _raw_api

    _FAST_MINER = _raw_api.backend == "cffi" and hasattr(_raw_keccak_lib, "keccak_copy")
except ImportError:  # pragma: no cover - pycryptodome layout changed
    _FAST_MINER = False

__all__ = [
    "PowTargetNotReached",
    "calculate_pow",
    "pow_hash",
    "pow_to_first_bit",
    "rlp_without_nonce",
    "seal",
    "validation_pow",
]

#: Go ``math.Log2E`` = 1/Ln2, the factor in ``Log2`` (exact constant rounded once, like Go constant folding).
_LOG2E = 1.4426950408889634073599246810018921
#: Target bit counts above this cannot be met by a 256-bit hash.
_MAX_BITS = 256


class PowTargetNotReached(CodecError):
    """:func:`seal` ran out of work time before finding a nonce with enough leading zero bits.

    Go's ``Seal`` returns "failed to reach the PoW target, specified pow time (%d seconds) was insufficient".
    """

    def __init__(self, target_bits: int, best_bits: int, nonces_tried: int, work_time_s: float) -> None:
        super().__init__(
            f"failed to reach the PoW target of {target_bits} leading zero bits in {work_time_s} s "
            f"(best {best_bits} bits after {nonces_tried} nonces)"
        )
        self.target_bits = target_bits
        self.best_bits = best_bits
        self.nonces_tried = nonces_tried
        self.work_time_s = work_time_s


def rlp_without_nonce(env: Envelope) -> bytes:
    """Return ``RLP([Expiry, TTL, Topic, Data])`` (Go ``rlpWithoutNonce``), cut from ``env.raw``.

    ``env.raw`` is canonical, so the four items' encodings are its payload minus the nonce's encoding at the
    end; only the list header is rebuilt. Cheaper than re-encoding (one copy of ``Data`` instead of three).
    """
    raw = env.raw
    first = raw[0]
    body_start = 1 if first <= 0xF7 else 1 + first - 0xF7
    nonce = env.nonce
    nonce_len = 1 if nonce < 0x80 else 1 + (nonce.bit_length() + 7) // 8
    body = raw[body_start : len(raw) - nonce_len]
    return rlp._header(len(body), 0xC0) + body


def pow_hash(env: Envelope) -> bytes:
    """Return ``keccak256(rlp_without_nonce ‖ nonce as 8-byte big-endian)``, the hash the PoW is read from."""
    return keccak256(rlp_without_nonce(env) + env.nonce.to_bytes(8, "big"))


def calculate_pow(env: Envelope, diff: int = 0) -> float:
    """Return the envelope's PoW exactly as Go's ``calculatePoW(diff)`` computes it.

    ``2**lz / len(short) / (TTL + diff)`` in float64, with ``TTL + diff`` in ``uint32`` arithmetic as in Go
    (it wraps); a zero divisor gives ``+inf`` (Go float division by zero). ``diff`` is a Go ``uint32``.
    """
    if not 0 <= diff <= UINT32_MAX:
        raise ValueError(f"diff {diff} does not fit uint32")
    short = rlp_without_nonce(env)
    digest = keccak256(short + env.nonce.to_bytes(8, "big"))
    leading_zeros = 256 - int.from_bytes(digest, "big").bit_length()
    divisor = (env.ttl + diff) & UINT32_MAX
    if divisor == 0:
        return math.inf
    return math.ldexp(1.0, leading_zeros) / len(short) / divisor


def validation_pow(env: Envelope, now: float) -> float:
    """Return the PoW a receiving node compares with its minimum (SG ``addAndBridge``, G920 ``add``; §1.5).

    If the envelope's sent time is in the future, Go recomputes the PoW with ``diff = sent - now + 1``
    ("adjusted for the time difference, plus one second for latency"); otherwise ``diff = 0``. ``now`` is UNIX
    seconds, truncated to ``uint32`` like Go's ``uint32(timeSource().Unix())``. Rejecting envelopes sent more
    than :data:`~wakucodec.constants.DEFAULT_SYNC_ALLOWANCE` ahead is the caller's check, made before this.
    """
    now32 = int(now) & UINT32_MAX
    sent = env.sent
    diff = (sent - now32 + 1) & UINT32_MAX if sent > now32 else 0
    return calculate_pow(env, diff)


def _go_log2(x: float) -> float:
    """Go ``math.Log2``: exact for powers of two, else ``Log(frac) * Log2E + exp`` after ``Frexp``."""
    frac, exp = math.frexp(x)
    if frac == 0.5:
        return float(exp - 1)
    return math.log(frac) * _LOG2E + exp


def pow_to_first_bit(target_pow: float, size: int, ttl: int) -> int:
    """Return the leading-zero-bit target of ``Seal``: ``max(1, ceil(log2(target_pow * size * ttl)))``.

    Go ``powToFirstBit`` with ``size = 20 + len(Data)`` (``Envelope.size()``, not ``len(short)``). A product
    ``<= 0`` (TTL 0) gives 1, as Go's ``int(Ceil(-Inf))`` does; an infinite one gives a target above 256.
    """
    x = target_pow * float(size) * float(ttl)  # same operation order as Go, for identical rounding
    if math.isnan(x):
        raise ValueError("PoW target is NaN")
    if x <= 0:
        return 1
    if math.isinf(x):
        return _MAX_BITS + 1
    return max(1, math.ceil(_go_log2(x)))


def seal(
    expiry: int,
    ttl: int,
    topic: bytes | bytearray | memoryview,
    data: bytes | bytearray | memoryview,
    *,
    target_pow: float,
    work_time_s: float,
    now_fn: Callable[[], float] = time.monotonic,
) -> Envelope:
    """Build an envelope and mine its nonce like Go's ``Envelope.Seal`` (§1.3).

    - ``target_pow == 0``: no sealing, nonce 0.
    - ``target_pow > 0``: search nonces 0, 1, 2, … in batches of 1024, checking ``now_fn() < deadline``
      before each batch (deadline = start + ``work_time_s``), and return the first nonce whose hash has
      :func:`pow_to_first_bit` leading zero bits; raise :class:`PowTargetNotReached` when time runs out (or
      at once when the target exceeds 256 bits and so can never be met).
    - ``target_pow < 0``: mine for the whole work time, keep the first nonce with the most leading zeros,
      and add the work time (rounded up to whole seconds; Go's ``WorkTime`` is ``uint32`` seconds) to
      ``expiry``.
    """
    if math.isnan(target_pow):
        raise ValueError("PoW target is NaN")
    if target_pow < 0:
        expiry = (expiry + math.ceil(work_time_s)) & UINT32_MAX
    env = make_envelope(expiry=expiry, ttl=ttl, topic=topic, data=data)
    if target_pow == 0:
        return env
    target = pow_to_first_bit(target_pow, env.size, ttl) if target_pow > 0 else 0
    if target > _MAX_BITS:
        raise PowTargetNotReached(target, 0, 0, work_time_s)
    mine = _mine_fast if _FAST_MINER else _mine_plain
    nonce, best, tried = mine(rlp_without_nonce(env), target, now_fn() + work_time_s, now_fn)
    if target and best < target:
        raise PowTargetNotReached(target, best, tried, work_time_s)
    return env.with_nonce(nonce) if nonce else env


# Both miners implement Go's loop: `leadingZeros > bestLeadingZeros` → remember the nonce; stop once the
# (positive) target is met. "lz > best" is tested as `value < bar` with bar = 2**(255 - best), so the
# per-nonce work is one hash and one integer comparison. They return (best_nonce, best_bits, nonces_tried).


def _mine_fast(
    short: bytes, target: int, deadline: float, now_fn: Callable[[], float]
) -> tuple[int, int, int]:
    lib = _raw_keccak_lib
    states: list[object] = []  # C Keccak states, freed in `finally`
    try:
        for _ in range(2):  # Keccak-256: capacity 64 bytes, 24 rounds
            pointer = _raw_api.VoidPointer()
            if lib.keccak_init(pointer.address_of(), 64, 24):
                raise RuntimeError("keccak_init failed")
            states.append(pointer.get())
        prefix_state, work_state = states
        out = _raw_api.ffi.new("uint8_t[32]")
        if lib.keccak_absorb(prefix_state, short, len(short)):
            raise RuntimeError("keccak_absorb failed")
        copy, absorb, digest = lib.keccak_copy, lib.keccak_absorb, lib.keccak_digest
        out_view = _raw_api.ffi.buffer(out)
        from_bytes = int.from_bytes
        best_nonce, best, bar, nonce = 0, 0, 1 << 255, 0
        while nonce <= UINT64_MAX and now_fn() < deadline:
            for n in range(nonce, min(nonce + SEAL_BATCH_SIZE, UINT64_MAX + 1)):
                copy(prefix_state, work_state)
                absorb(work_state, n.to_bytes(8, "big"), 8)
                digest(work_state, out, 32, 0x01)  # 0x01 = legacy Keccak padding
                value = from_bytes(out_view, "big")
                if value < bar:
                    best_nonce, best = n, 256 - value.bit_length()
                    if target and best >= target:
                        return best_nonce, best, n + 1
                    bar = 1 << (255 - best) if best < 256 else 0
            nonce += SEAL_BATCH_SIZE
        return best_nonce, best, min(nonce, UINT64_MAX + 1)
    finally:
        for state in states:
            lib.keccak_destroy(state)


def _mine_plain(
    short: bytes, target: int, deadline: float, now_fn: Callable[[], float]
) -> tuple[int, int, int]:
    from_bytes = int.from_bytes
    best_nonce, best, bar, nonce = 0, 0, 1 << 255, 0
    while nonce <= UINT64_MAX and now_fn() < deadline:
        for n in range(nonce, min(nonce + SEAL_BATCH_SIZE, UINT64_MAX + 1)):
            value = from_bytes(keccak256(short + n.to_bytes(8, "big")), "big")
            if value < bar:
                best_nonce, best = n, 256 - value.bit_length()
                if target and best >= target:
                    return best_nonce, best, n + 1
                bar = 1 << (255 - best) if best < 256 else 0
        nonce += SEAL_BATCH_SIZE
    return best_nonce, best, min(nonce, UINT64_MAX + 1)
