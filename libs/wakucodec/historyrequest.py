"""The dialect-independent mailserver history request, its dialects, and the server's rules for it.

Every 0x7e (P2P Request) dialect a real client sends decodes into one :class:`HistoryRequest`. The wire
forms are in :mod:`wakucodec.requestdialects`, the packet-level composite in :mod:`wakucodec.requests`.
Sources: docs/protocol-notes.md §4.1 (dialects), §4.2 (defaults, validation), §4.12 (geth), §9 item 6.

Server rules, two flavours:

- :meth:`HistoryRequest.with_defaults` + :meth:`HistoryRequest.validate` are status-go's
  ``MessagesRequestPayload.SetDefaults`` / ``Validate`` exactly: ``Limit 0 → 1000``,
  ``Upper 0 → now + 60``, then the errors ``"query range is invalid: lower > upper"``,
  ``"bloom filter and topics is empty"`` and ``"limit exceeds the maximum allowed value"``, in that order
  (SG ``mailserver/request.go``).
- :meth:`HistoryRequest.normalize` is what Mailmesh serves (docs/design.md "Protocol decisions":
  "Limit defaults to and is capped at 1000"): the same defaults, a limit above 1000 is **capped** instead of
  refused, the two other errors are kept, and non-empty topics **replace** the bloom (``bloom = None``)
  because Topics override Bloom (RFC8; SG LevelDB/Postgres backends ignore the bloom when topics are given).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from wakucodec.constants import BLOOM_SIZE, MAX_QUERY_LIMIT, TOPIC_LENGTH, UINT32_MAX
from wakucodec.errors import InvalidRequest

__all__ = [
    "CURSOR_LENGTH",
    "MAX_QUERY_LIMIT",
    "UPPER_SAFE_THRESHOLD",
    "Dialect",
    "HistoryRequest",
]

#: status-go ``whisperTTLSafeThreshold``, seconds: ``Upper == 0`` means ``now + 60`` (protocol-notes §4.2).
UPPER_SAFE_THRESHOLD = 60
#: status-go ``CursorLength``: ``sentTime(4) ‖ envelopeHash(32)`` (protocol-notes §4.3).
CURSOR_LENGTH = 4 + 32


class Dialect(enum.Enum):
    """The wire forms of a history request (protocol-notes §4.1 and §9 item 6)."""

    #: status-go plain ``MessagesRequest`` as the 0x7e payload itself (no envelope):
    #: ``[ID, From, To, Limit, Cursor, Bloom, Topics]`` — status-go clients ~2021-2024.
    STATUS_PLAIN = "status-plain"
    #: status-go ``MessagesRequestPayload`` inside a signed, sym-encrypted envelope:
    #: ``[Lower, Upper, Bloom, Topics, Limit, Cursor, Batch]`` — since PR #1805 (2020-01).
    STATUS_ENVELOPE = "status-envelope"
    #: pre-2020 status-go envelope payload ``[Lower, Upper, Bloom, Limit, Cursor, Batch]``
    #: (2018-10 to 2020-01).
    STATUS_LEGACY_6 = "status-legacy-6"
    #: SSPEC 4 / SSPEC 11 / NWAKU ``MailRequest``: ``[Lower, Upper, Bloom, Limit, Cursor]``; NWAKU sends it
    #: unsigned.
    SPEC_5 = "spec-5"
    #: RFC8 (8/WAKU-MAIL): ``[lower, upper, bloom, limit, cursor, topics]``.
    SPEC_6_TOPICS = "spec-6-topics"
    #: geth ``wnode`` / early status-go binary payload
    #: ``Lower(4 BE) ‖ Upper(4 BE) ‖ [Bloom(64)] ‖ [Limit(4 BE)] ‖ [Cursor(36)]``.
    GETH_BINARY = "geth-binary"

    @property
    def in_envelope(self) -> bool:
        """True for the dialects carried inside an encrypted envelope (all but :attr:`STATUS_PLAIN`)."""
        return self is not Dialect.STATUS_PLAIN

    @property
    def requires_signature(self) -> bool:
        """Whether the decrypted envelope payload must be signed.

        status-go's ``checkMsgSignature`` and geth's ``validateRequest`` both refuse an unsigned request, so
        the dialects those servers accept require one. The spec dialects do not: NWAKU's ``requestMail``
        seals the payload with a symmetric key only (protocol-notes §4.1 B).
        """
        return self in (Dialect.STATUS_ENVELOPE, Dialect.STATUS_LEGACY_6, Dialect.GETH_BINARY)


@dataclass(frozen=True, slots=True)
class HistoryRequest:
    """A mailserver history query, whatever dialect it arrived in.

    Construction checks the shape (raising :class:`~wakucodec.errors.InvalidRequest`), not the server's
    semantic rules — those are :meth:`validate` and :meth:`normalize`. ``bloom=b""`` is stored as ``None``:
    the wire has no distinction between an absent and an empty bloom.
    """

    #: Oldest envelope sent time requested (UNIX seconds, inclusive).
    lower: int = 0
    #: Newest envelope sent time requested (UNIX seconds, inclusive); 0 means "now + 60" once defaulted.
    upper: int = 0
    #: 64-byte bloom filter of wanted topics, or ``None`` when the request carries none.
    bloom: bytes | None = None
    #: Exact 4-byte topics wanted; when non-empty they override ``bloom``.
    topics: tuple[bytes, ...] = ()
    #: Maximum number of envelopes to return; 0 means the default (1000).
    limit: int = 0
    #: Opaque cursor from a previous 0x7d, or ``b""`` for the first page.
    cursor: bytes = b""
    #: Whether the client accepts several envelopes per 0x7f packet (status-go ``Batch``).
    batch: bool = True

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UINT32_MAX:
                raise InvalidRequest(f"{name} must be a uint32, got {value!r:.40}")
        bloom = self.bloom
        if bloom is not None:
            if not isinstance(bloom, (bytes, bytearray)):
                raise InvalidRequest("bloom must be bytes or None")
            if len(bloom) == 0:
                bloom = None
            elif len(bloom) != BLOOM_SIZE:
                raise InvalidRequest(f"bloom filter must be {BLOOM_SIZE} bytes, got {len(bloom)}")
            else:
                bloom = bytes(bloom)
            object.__setattr__(self, "bloom", bloom)
        if not isinstance(self.topics, (tuple, list)):
            raise InvalidRequest("topics must be a sequence of 4-byte topics")
        topics = tuple(self.topics)
        for topic in topics:
            if not isinstance(topic, (bytes, bytearray)) or len(topic) != TOPIC_LENGTH:
                raise InvalidRequest(f"topic must be {TOPIC_LENGTH} bytes, got {topic!r:.40}")
        object.__setattr__(self, "topics", tuple(bytes(t) for t in topics))
        if not isinstance(self.cursor, (bytes, bytearray)):
            raise InvalidRequest("cursor must be bytes")
        object.__setattr__(self, "cursor", bytes(self.cursor))
        if not isinstance(self.batch, bool):
            raise InvalidRequest("batch must be a bool")

    def with_defaults(self, now: int) -> HistoryRequest:
        """Apply status-go ``SetDefaults``: ``limit 0 → 1000``, ``upper 0 → now + 60`` (§4.2).

        ``now + 60`` is clamped to uint32 so a far-future clock cannot overflow the field.
        """
        limit = self.limit or MAX_QUERY_LIMIT
        upper = self.upper or min(now + UPPER_SAFE_THRESHOLD, UINT32_MAX)
        return replace(self, limit=limit, upper=upper)

    def validate(self) -> None:
        """Apply status-go ``MessagesRequestPayload.Validate`` strictly (call after :meth:`with_defaults`).

        Raises :class:`InvalidRequest` with status-go's exact message text, checked in status-go's order.
        """
        if self.upper < self.lower:
            raise InvalidRequest("query range is invalid: lower > upper")
        if self.bloom is None and not self.topics:
            raise InvalidRequest("bloom filter and topics is empty")
        if self.limit > MAX_QUERY_LIMIT:
            raise InvalidRequest("limit exceeds the maximum allowed value")

    def normalize(self, now: int) -> HistoryRequest:
        """Return the request Mailmesh serves: defaults applied, limit capped, topics overriding bloom.

        Differs from ``with_defaults().validate()`` only in capping ``limit`` at 1000 instead of refusing it
        (docs/design.md "Protocol decisions": "Limit defaults to and is capped at 1000"). Raises
        :class:`InvalidRequest` for an inverted range or a request with neither bloom nor topics, with
        status-go's message text.
        """
        req = self.with_defaults(now)
        req = replace(req, limit=min(req.limit, MAX_QUERY_LIMIT))
        req.validate()
        if req.topics and req.bloom is not None:
            req = replace(req, bloom=None)  # Topics override Bloom (RFC8; SG backends)
        return req
