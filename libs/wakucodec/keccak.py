"""Legacy Keccak-256, the hash Ethereum, Whisper and Waku v1 use everywhere.

Keccak-256 is *not* ``hashlib.sha3_256``: NIST SHA3 changed the padding byte (docs/protocol-notes.md §8),
and CPython's ``hashlib`` has no pre-NIST Keccak. safe-pysha3 (a maintained build of pysha3, the Keccak code
CPython's own ``_sha3`` module came from) is used: its hashlib-style object costs ~1.2 µs for a short input,
against ~5 µs through pycryptodome's ``Crypto.Hash.keccak`` wrapper, and the per-envelope hot path hashes two
or three times (docs/benchmarks.md). Its running state has hashlib semantics — ``digest()`` does not finalize,
``update()`` may follow — which the RLPx MACs need (docs/protocol-notes.md §5.4).
"""

from __future__ import annotations

from typing import Protocol, cast

import sha3  # type: ignore[import-untyped]  # safe-pysha3 ships no type information

__all__ = ["KeccakState", "keccak256", "new_keccak256"]

_keccak_256 = sha3.keccak_256


class KeccakState(Protocol):
    """A running Keccak-256 state (hashlib-style)."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None:
        """Absorb ``data``."""

    def digest(self) -> bytes:
        """The 32-byte digest of everything absorbed so far; the state stays usable."""

    def copy(self) -> KeccakState:
        """An independent copy of the state."""


def keccak256(data: bytes | bytearray | memoryview) -> bytes:
    """Return the 32-byte legacy Keccak-256 digest of ``data``."""
    return cast(bytes, _keccak_256(data).digest())


def new_keccak256(data: bytes = b"") -> KeccakState:
    """Return a running Keccak-256 state; ``.update()`` it, ``.digest()`` it (digest does not finalize)."""
    return cast(KeccakState, _keccak_256(data))
