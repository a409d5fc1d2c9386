"""Codec throughput (issue 2): envelopes decoded+hashed, PoW-checked, AES-GCM opened, per second.

All figures are single-threaded on one core; 1 KiB of data per envelope unless stated.
"""

from __future__ import annotations

import os

from bench.harness import Result, rate
from wakucodec import payload, rlp, symmetric
from wakucodec.envelope import decode_envelope, decode_envelopes, make_envelope
from wakucodec.pow import calculate_pow

BATCH = 256


def _envelopes(n: int, size: int = 1024) -> list[bytes]:
    return [
        make_envelope(
            expiry=1_700_000_000 + i, ttl=50, topic=i.to_bytes(4, "big"), data=os.urandom(size), nonce=i
        ).raw
        for i in range(n)
    ]


def run() -> list[Result]:
    """Run the codec suite."""
    raws = _envelopes(BATCH)
    packet = rlp.encode([rlp.decode(r) for r in raws])
    envs = [decode_envelope(r) for r in raws]
    key = symmetric.key_from_password("status-offline-inbox")
    sealed = [payload.seal_symmetric(os.urandom(1000), key) for _ in range(BATCH)]
    results = [
        rate(
            "decode + hash (1 KiB envelope)",
            lambda: [decode_envelope(r) for r in raws],
            ops_per_call=BATCH,
            unit="envelopes/s",
            target=100_000,
        ),
        rate(
            "decode Messages packet (256 × 1 KiB)",
            lambda: decode_envelopes(packet),
            ops_per_call=BATCH,
            unit="envelopes/s",
        ),
        rate(
            "PoW check (1 KiB envelope)",
            lambda: [calculate_pow(e) for e in envs],
            ops_per_call=BATCH,
            unit="envelopes/s",
            target=50_000,
        ),
        rate(
            "AES-GCM open + payload parse (1 KiB)",
            lambda: [payload.open_symmetric(d, key) for d in sealed],
            ops_per_call=BATCH,
            unit="messages/s",
            target=50_000,
        ),
    ]
    return results
