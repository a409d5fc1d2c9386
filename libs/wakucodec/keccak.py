"""Legacy Keccak-256, the hash Ethereum, Whisper and Waku v1 use everywhere.

Keccak-256 is *not* ``hashlib.sha3_256``: NIST SHA3 changed the padding byte (reference/wire-protocol.md §8),
and CPython's ``hashlib`` has no pre-NIST Keccak. pycryptodome's C implementation is used directly; the
eth-hash wrapper costs ~15 % more per call for nothing (reference/perf-reliability.md §4).
"""

from __future__ import annotations

from Crypto.Hash import keccak as _keccak

__all__ = ["keccak256", "new_keccak256"]


def keccak256(data: bytes) -> bytes:
    """Return the 32-byte legacy Keccak-256 digest of ``data``."""
    return _keccak.new(digest_bits=256, data=data).digest()


def new_keccak256(data: bytes = b"") -> _keccak.Keccak_Hash:
    """Return a running Keccak-256 state; ``.update()`` it, ``.digest()`` it (digest does not finalize)."""
    return _keccak.new(digest_bits=256, data=data, update_after_digest=True)
