"""The 36-byte authenticated history cursor (docs/archive.md "Cursor format"). Pure: no I/O, no gRPC.

Layout::

    cursor      = sent (4, big-endian) ‖ hash[0:16] ‖ tag (16)
    tag         = HMAC-SHA256(secret, "mailmesh-cursor-v1" ‖ direction ‖ sent ‖ hash[0:16] ‖ fingerprint)
                  [0:16]
    direction   = 0x01 forward | 0x02 backward          (the common.v1.Direction numbers)
    fingerprint = SHA256(lower (4 BE) ‖ upper (4 BE) ‖ topic count (4 BE) ‖ sorted distinct topics (4 each)
                         ‖ bloom (64, or nothing))

The fingerprint is of the *query as the client states it, normalised*: topics sorted and de-duplicated; the
bloom dropped when topics are present (topics override it, so it does not change the query); and ``upper``
exactly as requested — in particular ``upper = 0`` ("now + 60 s") stays 0. Binding the resolved
``now + 60`` instead would make every next page of an ``upper = 0`` query fail (the resolved value moves
every second, and differs between replicas), so the cursor binds the client's intent, which is stable. The
limit and batch sizes are not part of the query: a client may change its page size between pages.

Secrets rotate by configuration: the first secret signs, every secret verifies. Tags are compared with
:func:`hmac.compare_digest`.

What can be told apart on rejection: a wrong length; a cursor that verifies for the *other* direction; a
cursor whose position lies outside the query's time range (it cannot belong to this query). Anything else
that fails the tag — altered bytes, a forged tag, another deployment's secret, another query's cursor — is
indistinguishable by construction (the query is inside the MAC), and the message says so.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from archivestore.types import Direction
from meshcore.errors import InvalidArgument

__all__ = [
    "CURSOR_LENGTH",
    "DOMAIN",
    "HASH_PREFIX_LENGTH",
    "TAG_LENGTH",
    "CursorAuthError",
    "CursorCodec",
    "CursorDirectionError",
    "CursorError",
    "CursorLengthError",
    "CursorPosition",
    "CursorQueryMismatch",
    "query_fingerprint",
]

CURSOR_LENGTH = 36
HASH_PREFIX_LENGTH = 16
TAG_LENGTH = 16
DOMAIN = b"mailmesh-cursor-v1"
_SENT_LENGTH = 4
_UINT32_MAX = 0xFFFFFFFF
_DIRECTION_BYTE = {Direction.FORWARD: b"\x01", Direction.BACKWARD: b"\x02"}


class CursorError(InvalidArgument):
    """The request's cursor cannot be used (INVALID_ARGUMENT, reason INVALID_CURSOR)."""

    default_message = "invalid cursor"


class CursorLengthError(CursorError):
    """The cursor is not 36 bytes (truncated, padded, or not one of ours)."""

    def __init__(self, length: int) -> None:
        super().__init__(
            f"invalid cursor: must be {CURSOR_LENGTH} bytes, got {length}", {"cursor_length": length}
        )


class CursorDirectionError(CursorError):
    """The cursor is authentic but was issued for a query running in the other direction."""

    def __init__(self, issued_for: Direction) -> None:
        other = "backward" if issued_for is Direction.FORWARD else "forward"
        super().__init__(
            f"invalid cursor: it was issued for a {issued_for.value} query and cannot continue a {other} one",
            {"issued_for": issued_for.value},
        )


class CursorQueryMismatch(CursorError):
    """The cursor's position is outside this query's time range: it belongs to a different query."""

    def __init__(self, sent: int, lower: int, upper: int) -> None:
        super().__init__(
            f"invalid cursor: it belongs to a different query (its position, sent time {sent}, lies outside "
            f"the requested range {lower}..{upper})",
            {"cursor_sent": sent, "lower": lower, "upper": upper},
        )


class CursorAuthError(CursorError):
    """The tag does not verify under any configured secret."""

    def __init__(self) -> None:
        super().__init__(
            "invalid cursor: authentication failed — it was altered or forged, was issued by another "
            "deployment, or belongs to a different query (lower, upper, topics and bloom must be those of "
            "the request that returned it)"
        )


@dataclass(frozen=True, slots=True)
class CursorPosition:
    """Where a cursor resumes: the last delivered envelope's sent time and the first 16 bytes of its hash."""

    sent: int
    hash_prefix: bytes


def query_fingerprint(lower: int, upper: int, topics: Iterable[bytes], bloom: bytes | None) -> bytes:
    """SHA-256 of the normalised query (module docstring); ``upper`` is the *requested* one (0 stays 0).

    Topics are sorted and de-duplicated; a bloom given together with topics is ignored (topics override it).
    """
    unique = sorted(set(topics))
    parts = [
        lower.to_bytes(4, "big"),
        upper.to_bytes(4, "big"),
        len(unique).to_bytes(4, "big"),
        *unique,
        b"" if unique or bloom is None else bloom,
    ]
    return hashlib.sha256(b"".join(parts)).digest()


class CursorCodec:
    """Mints and checks cursors with a list of secrets: ``secrets[0]`` signs, every one verifies."""

    def __init__(self, secrets: Sequence[bytes]) -> None:
        if not secrets:
            raise ValueError("at least one cursor secret is required")
        if any(len(s) == 0 for s in secrets):
            raise ValueError("cursor secrets must not be empty")
        self._secrets = tuple(bytes(s) for s in secrets)

    def encode(self, sent: int, envelope_hash: bytes, direction: Direction, fingerprint: bytes) -> bytes:
        """The cursor resuming strictly after (forward) / before (backward) the envelope ``(sent, hash)``."""
        if not 0 <= sent <= _UINT32_MAX:
            raise ValueError(f"sent must be a uint32, got {sent}")
        if len(envelope_hash) < HASH_PREFIX_LENGTH:
            raise ValueError(f"envelope hash must be at least {HASH_PREFIX_LENGTH} bytes")
        body = sent.to_bytes(_SENT_LENGTH, "big") + envelope_hash[:HASH_PREFIX_LENGTH]
        return body + _tag(self._secrets[0], direction, body, fingerprint)

    def decode(
        self, cursor: bytes, direction: Direction, fingerprint: bytes, *, lower: int, upper: int
    ) -> CursorPosition:
        """Verify ``cursor`` for this query and direction and return its position.

        ``lower``/``upper`` are the query's resolved bounds, used only to explain a rejection. Raises a
        :class:`CursorError` subclass whose message says what is wrong.
        """
        if len(cursor) != CURSOR_LENGTH:
            raise CursorLengthError(len(cursor))
        body, tag = bytes(cursor[: CURSOR_LENGTH - TAG_LENGTH]), bytes(cursor[CURSOR_LENGTH - TAG_LENGTH :])
        position = CursorPosition(int.from_bytes(body[:_SENT_LENGTH], "big"), body[_SENT_LENGTH:])
        if self._verifies(tag, direction, body, fingerprint):
            return position
        other = Direction.BACKWARD if direction is Direction.FORWARD else Direction.FORWARD
        if self._verifies(tag, other, body, fingerprint):
            raise CursorDirectionError(other)
        if not lower <= position.sent <= upper:
            raise CursorQueryMismatch(position.sent, lower, upper)
        raise CursorAuthError

    def _verifies(self, tag: bytes, direction: Direction, body: bytes, fingerprint: bytes) -> bool:
        # Every secret is tried (no early exit): the time taken does not tell which one matched.
        ok = False
        for secret in self._secrets:
            ok |= hmac.compare_digest(tag, _tag(secret, direction, body, fingerprint))
        return ok


def _tag(secret: bytes, direction: Direction, body: bytes, fingerprint: bytes) -> bytes:
    message = DOMAIN + _DIRECTION_BYTE[direction] + body + fingerprint
    return hmac.new(secret, message, hashlib.sha256).digest()[:TAG_LENGTH]
