"""Outbox shards, scheduling days and the opaque resume position of a service-wide outbox watch.

A request belongs to one of ``shards`` shards (fixed per deployment): the first 8 bytes of
SHA-256(request id) modulo the shard count. It must be the same in every process and release, so it uses a
cryptographic hash, never Python's per-process ``hash()``. A send replica owns whole shards (lease
``outbox/<shard>``) and numbers each shard's changes itself, so a position in the service-wide change
stream is a vector of per-shard sequences; :class:`ResumePosition` gives it a versioned byte form that
clients treat as opaque (``WatchSendStatusesRequest.after_position`` in send.proto).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from msgstore.errors import InvalidPosition

__all__ = ["DAY_S", "POSITION_VERSION", "ResumePosition", "day_of", "lease_name", "shard_of"]

DAY_S = 86_400
#: First byte of an encoded position; a decoder refuses other versions instead of guessing.
POSITION_VERSION = 1
_HEAD = struct.Struct(">BH")  # version, shard count
_SEQ = struct.Struct(">Q")


def shard_of(request_id: str, shards: int) -> int:
    """The shard of ``request_id`` among ``shards``: stable across processes, hosts and releases."""
    if shards < 1:
        raise ValueError("shards must be at least 1")
    digest = hashlib.sha256(request_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def day_of(instant: float) -> int:
    """UNIX day number of an instant (partition key of the outbox's scheduling index)."""
    return int(instant // DAY_S)


def lease_name(shard: int) -> str:
    """The lease a send replica holds to own ``shard``."""
    return f"outbox/{shard}"


@dataclass(frozen=True, slots=True)
class ResumePosition:
    """Per-shard sequences already seen (0 = nothing of that shard yet)."""

    sequences: tuple[int, ...]

    @classmethod
    def start(cls, shards: int) -> ResumePosition:
        """Before every retained change of every shard."""
        return cls((0,) * shards)

    def encode(self) -> bytes:
        """``version (1 byte) | shard count (u16) | one u64 per shard``, big-endian."""
        return _HEAD.pack(POSITION_VERSION, len(self.sequences)) + b"".join(
            _SEQ.pack(s) for s in self.sequences
        )

    @classmethod
    def decode(cls, raw: bytes, shards: int) -> ResumePosition:
        """Parse ``raw``; empty = :meth:`start`. InvalidPosition if malformed or for another shard count."""
        if not raw:
            return cls.start(shards)
        if len(raw) < _HEAD.size:
            raise InvalidPosition("position too short")
        version, count = _HEAD.unpack_from(raw)
        if version != POSITION_VERSION:
            raise InvalidPosition(f"unknown position version {version}")
        if count != shards:
            raise InvalidPosition(f"position is for {count} shards, the outbox has {shards}")
        if len(raw) != _HEAD.size + count * _SEQ.size:
            raise InvalidPosition("position length does not match its shard count")
        return cls(tuple(_SEQ.unpack_from(raw, _HEAD.size + i * _SEQ.size)[0] for i in range(count)))

    def advanced(self, shard: int, sequence: int) -> ResumePosition:
        """This position with ``shard`` moved to ``sequence`` (never backwards)."""
        seqs = list(self.sequences)
        seqs[shard] = max(seqs[shard], sequence)
        return ResumePosition(tuple(seqs))
