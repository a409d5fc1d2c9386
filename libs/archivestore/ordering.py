"""The archive's total order over ``(sent, hash)`` and how a position (possibly a hash prefix) resumes it.

A 36-byte cursor carries only 16 bytes of the hash (docs/archive.md "Cursor format"), so resuming must treat
a short hash as a prefix: going forward, strictly after ``(sent, prefix ‖ ff…ff)``; going backward, strictly
before ``(sent, prefix ‖ 00…00)``. Both adapters use these helpers so they agree to the byte.
"""

from __future__ import annotations

from archivestore.types import Direction, Position, StoredEnvelope

HASH_LEN = 32


def resume_key(position: Position, direction: Direction) -> tuple[int, bytes]:
    """The exclusive bound ``(sent, full 32-byte hash)`` that resumes iteration after ``position``."""
    if len(position.hash) > HASH_LEN:
        raise ValueError("position hash longer than 32 bytes")
    pad = HASH_LEN - len(position.hash)
    fill = b"\xff" if direction is Direction.FORWARD else b"\x00"
    return position.sent, position.hash + fill * pad


def is_after(envelope: StoredEnvelope, position: Position | None, direction: Direction) -> bool:
    """Whether ``envelope`` comes strictly after ``position`` in ``direction`` (True when no position)."""
    if position is None:
        return True
    bound = resume_key(position, direction)
    key = (envelope.sent, envelope.hash)
    return key > bound if direction is Direction.FORWARD else key < bound


def sort_key(envelope: StoredEnvelope) -> tuple[int, bytes]:
    """The ordering key of a stored envelope."""
    return envelope.sent, envelope.hash


def position_of(envelope: StoredEnvelope) -> Position:
    """The position just at ``envelope`` (resuming from it skips it)."""
    return Position(envelope.sent, envelope.hash)
